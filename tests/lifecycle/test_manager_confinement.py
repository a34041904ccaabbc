"""The lifecycle manager reads and runs only what lies in the model's folder:
model names are single folder names, label files stay inside the model folder
after symlinks, and a load refused for either leaves nothing read or run."""

from __future__ import annotations

import json

import pytest

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument
from model_fixtures import PYTHON_XY_CONFIG, write_model

MARKING_MODEL = """
import pathlib
import triton_python_backend_utils as pb_utils

pathlib.Path({marker!r}).write_text("ran")


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)])]
"""


def labelled(name: str, labels: str) -> str:
    return PYTHON_XY_CONFIG.format(name=name).replace(
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]',
        f'output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "{labels}" }} ]',
    )


@pytest.fixture
def outside(tmp_path):
    """A model folder right outside the repository (``<repository>/..``), whose
    model.py leaves a marker if it is ever imported."""
    marker = tmp_path.parent / f"{tmp_path.name}-marker"
    parent = tmp_path.parent
    (parent / "1").mkdir(exist_ok=True)
    (parent / "1" / "model.py").write_text(MARKING_MODEL.format(marker=str(marker)))
    (parent / "config.pbtxt").write_text('backend: "python"\n')
    yield marker
    for leftover in (parent / "1" / "model.py", parent / "config.pbtxt", marker):
        leftover.unlink(missing_ok=True)
    (parent / "1").rmdir()


@pytest.mark.parametrize("name", ["..", ".", "a/b", "a\0b"])
def test_load_of_a_name_that_is_not_a_folder_name_is_refused(stack, outside, name):
    with pytest.raises(InvalidArgument) as info:
        stack.repository_control.load_model(name)
    shown = name.replace("\0", "\\0")
    assert str(info.value) == (
        f"model name '{shown}': expected a single folder name (not '.' or '..', without '/' or NUL)"
    )
    assert info.value.code is ErrorCode.INVALID_ARG
    assert not outside.exists()


def test_load_of_dot_dot_with_a_config_override_is_refused(stack, outside):
    with pytest.raises(InvalidArgument):
        stack.repository_control.load_model("..", {"config": json.dumps({"backend": "python"})})
    assert not outside.exists()


def test_unload_of_a_name_that_is_not_a_folder_name_is_refused(stack):
    with pytest.raises(InvalidArgument):
        stack.repository_control.unload_model("..")


def test_manager_refuses_a_name_that_is_not_a_folder_name(stack, outside):
    with pytest.raises(InvalidArgument):
        stack.manager.load_model("..")
    assert not outside.exists()


def test_absolute_default_model_filename_override_is_refused_unrun(tmp_path, stack):
    marker = tmp_path / "marker"
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(MARKING_MODEL.format(marker=str(marker)))
    write_model(tmp_path, "victim", PYTHON_XY_CONFIG.format(name="victim"))
    (tmp_path / "victim" / "1").mkdir()
    override = {"backend": "python", "default_model_filename": str(evil)}
    with pytest.raises(InvalidArgument) as info:
        stack.repository_control.load_model("victim", {"config": json.dumps(override)})
    assert str(info.value) == (
        "failed to load 'victim', failed to poll from model repository: load request config "
        f"for 'victim': default_model_filename '{evil}' is outside the model folder"
    )
    assert not marker.exists()


def test_labels_are_read_from_the_model_folder(tmp_path, stack):
    write_model(
        tmp_path,
        "cls",
        labelled("cls", "labels.txt"),
        {"1/model.py": MARKING_MODEL.format(marker=str(tmp_path / "m")), "labels.txt": "a\nb\n"},
    )
    stack.manager.load_model("cls")
    assert stack.registry.get("cls", "").labels == {"Y": ["a", "b"]}


def test_label_file_symlinked_out_of_the_model_folder_is_refused(tmp_path, stack):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    write_model(
        tmp_path,
        "cls",
        labelled("cls", "labels.txt"),
        {"1/model.py": MARKING_MODEL.format(marker=str(tmp_path / "m"))},
    )
    (tmp_path / "cls" / "labels.txt").symlink_to(secret)
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("cls")
    reason = stack.registry.statuses("cls")[1].reason
    assert reason == (
        "model 'cls' version 1, output 'Y': label_filename 'labels.txt' is outside the model "
        "folder (a symlink leads out)"
    )
    assert "root" not in reason


def test_label_file_that_is_not_a_regular_file_is_refused(tmp_path, stack):
    write_model(
        tmp_path,
        "cls",
        labelled("cls", "labels"),
        {"1/model.py": MARKING_MODEL.format(marker=str(tmp_path / "m"))},
    )
    (tmp_path / "cls" / "labels").mkdir()
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("cls")
    assert stack.registry.statuses("cls")[1].reason == (
        f"model 'cls' version 1, output 'Y': label_filename '{tmp_path / 'cls' / 'labels'}' "
        "is not a regular file"
    )
