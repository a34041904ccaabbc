"""A model folder without ``config.pbtxt`` loads as in Triton: the backend
follows from the model file in its version folders and the name from the
folder; the backend then auto-completes the rest (inputs, outputs, batching).
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#auto-generated-model-configuration
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.errors import ConfigError
from edgebox.repository.config import config_to_dict, read_model_config


def model_folder(root: Path, name: str, files: dict[str, bytes]) -> Path:
    model_dir = root / name
    model_dir.mkdir()
    for relative, content in files.items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return model_dir


@pytest.mark.parametrize(
    ("filename", "backend", "platform"),
    [
        ("model.py", "python", ""),
        ("model.onnx", "onnxruntime", "onnxruntime_onnx"),
        ("model.plan", "tensorrt", "tensorrt_plan"),
    ],
)
def test_folder_without_config_takes_its_backend_from_the_model_file(
    tmp_path: Path, filename: str, backend: str, platform: str
) -> None:
    model_dir = model_folder(tmp_path, "detector", {f"1/{filename}": b"x"})
    config = read_model_config(model_dir)
    data = config_to_dict(config)
    assert (data["name"], data["backend"], data["platform"]) == ("detector", backend, platform)
    assert data["default_model_filename"] == filename
    assert data["version_policy"] == {"latest": {"num_versions": 1}}
    assert (data["max_batch_size"], data["input"], data["output"]) == (0, [], [])
    assert [group["count"] for group in data["instance_group"]] == [1]


def test_folder_without_config_follows_its_newest_version_with_a_model_file(
    tmp_path: Path,
) -> None:
    model_dir = model_folder(
        tmp_path, "m", {"1/model.onnx": b"x", "2/model.py": b"", "3/notes.txt": b""}
    )
    assert read_model_config(model_dir).backend == "python"


def test_folder_without_config_or_model_file_names_the_folder_and_what_was_looked_for(
    tmp_path: Path,
) -> None:
    model_dir = model_folder(tmp_path, "m", {"1/weights.bin": b"x"})
    with pytest.raises(ConfigError) as info:
        read_model_config(model_dir)
    assert str(info.value) == (
        f"{model_dir}: no config.pbtxt, and no version folder holds a model file to tell "
        "the backend from (looked for 'model.onnx', 'model.plan', 'model.py')"
    )


def test_folder_without_config_or_version_folders_says_so(tmp_path: Path) -> None:
    model_dir = model_folder(tmp_path, "m", {"README.md": b"x"})
    with pytest.raises(ConfigError) as info:
        read_model_config(model_dir)
    assert str(info.value) == (
        f"{model_dir}: no config.pbtxt, and no version folder holds a model file to tell "
        "the backend from (looked for 'model.onnx', 'model.plan', 'model.py')"
    )
