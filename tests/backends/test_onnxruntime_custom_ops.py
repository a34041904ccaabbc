"""Custom-op libraries for ONNX models (``model_operations {
op_library_filename }``): registered on every session of the model that names
them, only from inside its folder, and a model whose library is missing,
broken or not configured stays UNAVAILABLE with the reason.

The library is onnxruntime-extensions' real one, copied into each model
folder; the model inverts a 2x2 matrix with its ``ai.onnx.contrib``
``Inverse`` op (tests/custom_op_models.py), driven through the in-process
stack with the real ONNX Runtime backend.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from google._upb import _message as upb_message

from custom_op_models import (
    LIBRARY,
    add_inverse_model,
    extensions_library,
    inverse_of,
    random_invertible,
)
from edgebox.backends.base import ModelContext
from edgebox.backends.onnxruntime import Backend
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unavailable
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, Tensor


def infer_inverse(stack, model: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = random_invertible(seed)
    response = stack.dataplane.infer(InferRequest(model, [Tensor("x", "FP32", x)]))
    (y,) = [t.data for t in response.outputs if t.name == "y"]
    return x, y


def failure_of(stack, model: str) -> EdgeboxError:
    with pytest.raises(EdgeboxError) as info:
        stack.manager.load_model(model)
    return info.value


def test_model_using_a_custom_op_loads_answers_and_unloads(tmp_path: Path, stack) -> None:
    add_inverse_model(tmp_path, "inverse")
    stack.manager.load_model("inverse")
    assert stack.registry.statuses("inverse")[1].state is ModelState.READY
    x, y = infer_inverse(stack, "inverse", seed=1)
    np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)

    stack.manager.unload_model("inverse")
    assert stack.manager.wait_retired(10)
    assert stack.registry.statuses("inverse")[1] == VersionStatus(
        ModelState.UNAVAILABLE, "unloaded"
    )
    # Unloading let ONNX Runtime close the library; loading again opens it anew.
    stack.manager.load_model("inverse")
    x, y = infer_inverse(stack, "inverse", seed=2)
    np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)


def test_two_models_each_with_its_copy_of_the_library_both_answer(tmp_path: Path, stack) -> None:
    add_inverse_model(tmp_path, "first")
    add_inverse_model(tmp_path, "second", library="libonnxcustom.so")
    stack.manager.load_model("first")
    stack.manager.load_model("second")
    for seed, model in enumerate(["first", "second", "first"]):
        x, y = infer_inverse(stack, model, seed)
        np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)


def test_a_symlink_to_the_library_elsewhere_in_the_model_folder_is_followed(
    tmp_path: Path, stack
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", library="lib/current.so", copy_library=False)
    (model_dir / "ops").mkdir()
    shutil.copyfile(extensions_library(), model_dir / "ops" / "v2.so")
    (model_dir / "lib").mkdir()
    (model_dir / "lib" / "current.so").symlink_to("../ops/v2.so")
    stack.manager.load_model("inverse")
    x, y = infer_inverse(stack, "inverse", seed=3)
    np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)


def test_model_without_its_library_configured_is_unavailable_with_onnx_runtimes_reason(
    tmp_path: Path, stack
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", library=None)
    shutil.copyfile(extensions_library(), model_dir / "libonnxcustom.so")
    failure_of(stack, "inverse")
    status = stack.registry.statuses("inverse")[1]
    assert status.state is ModelState.UNAVAILABLE
    model_path = model_dir / "1" / "model.onnx"
    assert status.reason.startswith(
        f"model 'inverse' version 1: ONNX Runtime cannot load '{model_path}': "
    )
    assert status.reason.endswith("ai.onnx.contrib:Inverse(-1) is not a registered function/op")


def test_missing_library_is_unavailable_naming_the_path_and_the_config_line(
    tmp_path: Path, stack
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", copy_library=False)
    error = failure_of(stack, "inverse")
    assert error.code is ErrorCode.UNAVAILABLE
    assert stack.registry.statuses("inverse")[1] == VersionStatus(
        ModelState.UNAVAILABLE,
        f"model 'inverse' version 1: custom op library '{model_dir / LIBRARY}' not found "
        f"({model_dir / 'config.pbtxt'}:4: model_operations.op_library_filename)",
    )


def test_library_that_onnx_runtime_cannot_load_is_unavailable_with_the_loaders_error(
    tmp_path: Path, stack
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", copy_library=False)
    (model_dir / "ops").mkdir()
    (model_dir / LIBRARY).write_bytes(b"not a shared library\n" * 64)
    failure_of(stack, "inverse")
    reason = stack.registry.statuses("inverse")[1].reason
    assert reason.startswith(
        f"model 'inverse' version 1: cannot load custom op library "
        f"'{model_dir / LIBRARY}' ({model_dir / 'config.pbtxt'}:4: "
        "model_operations.op_library_filename): "
    )
    assert reason.endswith("invalid ELF header")


def test_shared_library_without_onnx_runtimes_entry_point_is_unavailable(
    tmp_path: Path, stack
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", copy_library=False)
    (model_dir / "ops").mkdir()
    # A real shared library that is no custom-op library: protobuf's C extension.
    shutil.copyfile(upb_message.__file__, model_dir / LIBRARY)
    failure_of(stack, "inverse")
    reason = stack.registry.statuses("inverse")[1].reason
    assert reason.startswith(
        f"model 'inverse' version 1: cannot load custom op library '{model_dir / LIBRARY}' "
        f"({model_dir / 'config.pbtxt'}:4: model_operations.op_library_filename): Fail: "
    )
    assert reason.endswith("undefined symbol: RegisterCustomOps")


@pytest.fixture
def library_outside(tmp_path: Path) -> Path:
    """A working copy of the library next to the model folders: a model that
    reached it would load and answer."""
    path = tmp_path / "x.so"
    shutil.copyfile(extensions_library(), path)
    return path


@pytest.mark.parametrize("name", ["../x.so", "absolute"])
def test_library_named_outside_the_model_folder_is_refused_at_parse(
    tmp_path: Path, stack, library_outside: Path, name: str
) -> None:
    name = str(library_outside) if name == "absolute" else name
    model_dir = add_inverse_model(tmp_path, "inverse", library=name, copy_library=False)
    failure_of(stack, "inverse")
    assert stack.registry.statuses("inverse")[None] == VersionStatus(
        ModelState.UNAVAILABLE,
        f"{model_dir / 'config.pbtxt'}:4:20: model_operations.op_library_filename '{name}' is "
        "outside the model folder",
    )


def test_load_override_naming_a_library_outside_the_model_folder_is_refused(
    tmp_path: Path, stack, library_outside: Path
) -> None:
    add_inverse_model(tmp_path, "inverse")
    override = {
        "platform": "onnxruntime_onnx",
        "model_operations": {"op_library_filename": [str(library_outside)]},
    }
    with pytest.raises(InvalidArgument) as info:
        stack.repository_control.load_model("inverse", {"config": json.dumps(override)})
    assert str(info.value) == (
        "failed to load 'inverse', failed to poll from model repository: load request config "
        f"for 'inverse': model_operations.op_library_filename '{library_outside}' is outside "
        "the model folder"
    )
    assert not stack.registry.is_ready("inverse")


def test_library_symlinked_out_of_the_model_folder_is_refused(
    tmp_path: Path, stack, library_outside: Path
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", copy_library=False)
    (model_dir / "ops").mkdir()
    (model_dir / LIBRARY).symlink_to(library_outside)
    error = failure_of(stack, "inverse")
    assert error.code is ErrorCode.INVALID_ARG
    assert stack.registry.statuses("inverse")[1] == VersionStatus(
        ModelState.UNAVAILABLE,
        f"model 'inverse' version 1: {model_dir / 'config.pbtxt'}:4: "
        f"model_operations.op_library_filename: custom op library '{LIBRARY}' is outside the "
        "model folder (a symlink leads out)",
    )


def test_backend_refuses_an_absolute_library_even_past_the_config_check(
    tmp_path: Path, library_outside: Path
) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", library=None)
    config = read_model_config(model_dir)
    config.model_operations.op_library_filename.append(str(library_outside))
    context = ModelContext("inverse", 1, config, model_dir, model_dir / "1")
    with pytest.raises(InvalidArgument) as error:
        Backend().complete_config(context)
    assert str(error.value) == (
        f"model 'inverse' version 1: {model_dir / 'config.pbtxt'}: "
        f"model_operations.op_library_filename: custom op library '{library_outside}' is "
        "outside the model folder"
    )


def test_autocomplete_reads_a_custom_op_model_with_its_library(tmp_path: Path) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse")
    config_path = model_dir / "config.pbtxt"
    config_path.write_text(
        "\n".join(line for line in config_path.read_text().splitlines() if "put" not in line) + "\n"
    )
    context = ModelContext("inverse", 1, read_model_config(model_dir), model_dir, model_dir / "1")
    backend = Backend()
    backend.complete_config(context)
    backend.unload(context)
    assert [(t.name, list(t.dims)) for t in context.config.input] == [("x", [4])]
    assert [(t.name, list(t.dims)) for t in context.config.output] == [("y", [4])]


def test_missing_library_fails_autocomplete_as_unavailable(tmp_path: Path) -> None:
    model_dir = add_inverse_model(tmp_path, "inverse", copy_library=False)
    context = ModelContext("inverse", 1, read_model_config(model_dir), model_dir, model_dir / "1")
    with pytest.raises(Unavailable):
        Backend().complete_config(context)
