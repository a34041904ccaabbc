"""Backends open, import and hand to their runtime only files inside the model
folder, and pass on to ONNX Runtime only settings that touch no file, even for
a config that reached them without the parser's checks (a config built in code
or edited after parsing)."""

from __future__ import annotations

from pathlib import Path

import onnxruntime
import pytest

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.onnxruntime import Backend as OnnxBackend
from edgebox.backends.onnxruntime.providers import providers_for as _providers_for
from edgebox.backends.onnxruntime.session_options import session_options as _session_options
from edgebox.backends.python import Backend as PythonBackend
from edgebox.errors import InvalidArgument
from edgebox.repository.config import read_model_config
from model_fixtures import PYTHON_XY_CONFIG, add_add_sub, write_model

MARKING_MODEL = """
import pathlib

pathlib.Path({marker!r}).write_text("ran")


class TritonPythonModel:
    def execute(self, requests):
        return []
"""


def context_for(model_dir: Path, version: int = 1) -> ModelContext:
    config = read_model_config(model_dir)
    return ModelContext(model_dir.name, version, config, model_dir, model_dir / str(version))


# ------------------------------------------------------------------ model files


def test_python_model_file_given_as_an_absolute_path_is_not_imported(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(MARKING_MODEL.format(marker=str(marker)))
    model_dir = write_model(tmp_path / "repo", "m", PYTHON_XY_CONFIG.format(name="m"))
    (model_dir / "1").mkdir()
    context = context_for(model_dir)
    context.config.default_model_filename = str(evil)
    with pytest.raises(InvalidArgument) as error:
        PythonBackend().complete_config(context)
    assert str(error.value) == (
        f"model 'm' version 1: default_model_filename '{evil}' is outside the model folder"
    )
    assert not marker.exists()


def test_python_model_file_symlinked_out_of_the_model_folder_is_not_imported(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(MARKING_MODEL.format(marker=str(marker)))
    model_dir = write_model(tmp_path / "repo", "m", PYTHON_XY_CONFIG.format(name="m"))
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").symlink_to(evil)
    with pytest.raises(InvalidArgument) as error:
        PythonBackend().complete_config(context_for(model_dir))
    assert str(error.value) == (
        "model 'm' version 1: default_model_filename 'model.py' is outside the model folder "
        "(a symlink leads out)"
    )
    assert not marker.exists()


def test_python_model_file_shared_between_versions_still_loads(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    model_dir = write_model(
        tmp_path / "repo",
        "m",
        PYTHON_XY_CONFIG.format(name="m") + 'default_model_filename: "../shared/model.py"\n',
        {"shared/model.py": MARKING_MODEL.format(marker=str(marker))},
    )
    (model_dir / "1").mkdir()
    context = context_for(model_dir)
    backend = PythonBackend()
    backend.complete_config(context)
    backend.unload(context)
    assert marker.read_text() == "ran"


def test_onnx_model_file_symlinked_out_of_the_model_folder_is_not_opened(tmp_path: Path) -> None:
    model_dir = add_add_sub(tmp_path / "repo")
    outside = tmp_path / "elsewhere.onnx"
    (model_dir / "1" / "model.onnx").rename(outside)
    (model_dir / "1" / "model.onnx").symlink_to(outside)
    with pytest.raises(InvalidArgument) as error:
        OnnxBackend().complete_config(context_for(model_dir))
    assert str(error.value) == (
        "model 'add_sub' version 1: default_model_filename 'model.onnx' is outside the model "
        "folder (a symlink leads out)"
    )


# ------------------------------------------------------------------ ONNX Runtime settings


def test_session_entry_that_writes_a_file_is_refused_at_load(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    context = context_for(add_add_sub(tmp_path / "repo"))
    key = "session.collect_node_memory_stats_to_file"
    context.config.parameters[key].string_value = str(target)
    with pytest.raises(InvalidArgument) as error:
        _session_options(onnxruntime, context)
    assert str(error.value) == (
        f"model 'add_sub' version 1: parameter '{key}' makes ONNX Runtime read or write files, "
        "which a model config may not ask for"
    )
    assert target.read_text() == "keep me"


def test_unknown_session_entry_is_refused_at_load(tmp_path: Path) -> None:
    context = context_for(add_add_sub(tmp_path / "repo"))
    context.config.parameters["session.intra_op_num_threads"].string_value = "512"
    with pytest.raises(InvalidArgument, match=r"parameter 'session.intra_op_num_threads' is not"):
        _session_options(onnxruntime, context)


def test_allowed_session_entries_still_reach_onnxruntime(tmp_path: Path) -> None:
    context = context_for(add_add_sub(tmp_path / "repo"))
    context.config.parameters["session.disable_prepacking"].string_value = "1"
    options = _session_options(onnxruntime, context)
    assert options.get_session_config_entry("session.disable_prepacking") == "1"


@pytest.fixture
def tensorrt_ep(monkeypatch: pytest.MonkeyPatch) -> None:
    """This onnxruntime build as one with the CUDA and TensorRT providers."""
    monkeypatch.setattr(
        onnxruntime,
        "get_available_providers",
        lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
    )


def with_tensorrt_accelerator(model_dir: Path, parameters: dict[str, str]) -> ModelContext:
    context = context_for(model_dir)
    accelerator = context.config.optimization.execution_accelerators.gpu_execution_accelerator.add()
    accelerator.name = "tensorrt"
    for key, value in parameters.items():
        accelerator.parameters[key] = value
    return context


def test_tensorrt_engine_cache_is_placed_inside_the_model_folder(
    tmp_path: Path, tensorrt_ep: None
) -> None:
    model_dir = add_add_sub(tmp_path / "repo")
    context = with_tensorrt_accelerator(
        model_dir,
        {
            "precision_mode": "FP16",
            "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": "cache",
        },
    )
    providers = _providers_for(onnxruntime, context, InstanceSpec("add_sub_0_0", "GPU", 0))
    name, options = providers[0]
    assert name == "TensorrtExecutionProvider"
    assert options["trt_engine_cache_path"] == str(model_dir / "cache")
    assert options["trt_fp16_enable"] is True


def test_tensorrt_engine_cache_outside_the_model_folder_is_refused(
    tmp_path: Path, tensorrt_ep: None
) -> None:
    model_dir = add_add_sub(tmp_path / "repo")
    (model_dir / "cache").symlink_to(tmp_path)
    context = with_tensorrt_accelerator(
        model_dir, {"trt_engine_cache_enable": "1", "trt_engine_cache_path": "cache"}
    )
    with pytest.raises(InvalidArgument) as error:
        _providers_for(onnxruntime, context, InstanceSpec("add_sub_0_0", "GPU", 0))
    assert str(error.value) == (
        "model 'add_sub' version 1: accelerator parameter 'trt_engine_cache_path' 'cache' is "
        "outside the model folder (a symlink leads out)"
    )


def test_tensorrt_option_that_loads_a_library_is_refused(tmp_path: Path, tensorrt_ep: None) -> None:
    context = with_tensorrt_accelerator(
        add_add_sub(tmp_path / "repo"), {"trt_extra_plugin_lib_paths": "/tmp/libevil.so"}
    )
    with pytest.raises(InvalidArgument) as error:
        _providers_for(onnxruntime, context, InstanceSpec("add_sub_0_0", "GPU", 0))
    assert str(error.value).startswith(
        "model 'add_sub' version 1: execution accelerator 'tensorrt': accelerator parameter "
        "'trt_extra_plugin_lib_paths' is not a TensorRT execution provider option edgebox "
        "passes on (allowed: "
    )
