"""The ONNX Runtime backend: Triton's auto-complete for ONNX models, a strict
comparison of config and model file, session options from config parameters,
and execution on the CPU execution provider.

Each test writes a model folder under ``tmp_path`` (config.pbtxt plus
``1/model.onnx`` built with the ``onnx`` helper API) and loads it through the
backend contract, as the lifecycle manager does.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.onnxruntime import Backend
from edgebox.backends.onnxruntime.autocomplete import DEFAULT_MAX_BATCH_SIZE
from edgebox.backends.onnxruntime.instance import OnnxInstance
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor
from model_fixtures import ADD_SUB_CONFIG, add_add_sub, write_model
from scripts.onnx_builders import IR_VERSION, OPSET, build_add_sub

CUDA_NOTE = "CUDA execution provider not in this onnxruntime build; running on the CPU"


def build_identity(path: Path, shape: list[int | str]) -> Path:
    """x -> y, FP32, with the given (possibly fixed) shape."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def context_for(model_dir: Path, version: int = 1) -> ModelContext:
    config = read_model_config(model_dir)
    return ModelContext(model_dir.name, version, config, model_dir, model_dir / str(version))


def add_sub_with(root: Path, name: str, old: str, new: str) -> Path:
    config = ADD_SUB_CONFIG.format(name=name)
    assert old in config
    model_dir = write_model(root, name, config.replace(old, new))
    build_add_sub(model_dir / "1" / "model.onnx")
    return model_dir


@pytest.fixture
def backend() -> Backend:
    return Backend()


@pytest.fixture
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """This onnxruntime build as one without the CUDA execution provider,
    whatever the machine has."""
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])


def mismatch(context: ModelContext, text: str) -> str:
    config_path = context.model_dir / "config.pbtxt"
    model_path = context.version_dir / "model.onnx"
    return f"{context.where}: {config_path} does not match {model_path}: {text}"


def complete_failure(backend: Backend, context: ModelContext) -> EdgeboxError:
    with pytest.raises(EdgeboxError) as info:
        backend.complete_config(context)
    backend.unload(context)
    return info.value


def add_sub_request(batch: int = 2) -> tuple[InferRequest, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((batch, 16)).astype(np.float32)
    b = rng.standard_normal((batch, 16)).astype(np.float32)
    request = InferRequest(
        "add_sub",
        inputs=[Tensor("INPUT0", "FP32", a), Tensor("INPUT1", "FP32", b)],
        id="req-7",
    )
    return request, a, b


# ------------------------------------------------------------------ auto-complete


def test_catalog_creates_the_onnxruntime_backend() -> None:
    backend = BackendCatalog().get("onnxruntime")
    assert isinstance(backend, Backend)
    assert backend.name == "onnxruntime"


def test_autocomplete_fills_io_and_batches_a_batchable_model(
    tmp_path: Path, backend: Backend
) -> None:
    model_dir = write_model(tmp_path, "add_sub", 'platform: "onnxruntime_onnx"\n')
    build_add_sub(model_dir / "1" / "model.onnx")
    context = context_for(model_dir)

    backend.complete_config(context)
    backend.unload(context)

    config = context.config
    assert DEFAULT_MAX_BATCH_SIZE == 4
    assert config.max_batch_size == 4
    fp32 = model_config_pb2.TYPE_FP32
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("INPUT0", fp32, [16]),
        ("INPUT1", fp32, [16]),
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [
        ("OUTPUT0", fp32, [16]),
        ("OUTPUT1", fp32, [16]),
    ]


def test_autocomplete_infers_the_platform_from_model_onnx(tmp_path: Path, backend: Backend) -> None:
    model_dir = write_model(tmp_path, "add_sub", "# filled from the model file\n")
    build_add_sub(model_dir / "1" / "model.onnx")
    context = context_for(model_dir)
    assert (context.config.platform, context.config.backend) == (
        "onnxruntime_onnx",
        "onnxruntime",
    )
    backend.complete_config(context)
    backend.unload(context)
    assert context.config.max_batch_size == 4
    assert len(context.config.input) == 2


def test_autocomplete_keeps_fixed_shapes_unbatched(tmp_path: Path, backend: Backend) -> None:
    model_dir = write_model(tmp_path, "fixed", 'platform: "onnxruntime_onnx"\n')
    build_identity(model_dir / "1" / "model.onnx", [2, 16])
    context = context_for(model_dir)

    backend.complete_config(context)
    backend.unload(context)

    assert context.config.max_batch_size == 0
    assert [(t.name, list(t.dims)) for t in context.config.input] == [("x", [2, 16])]
    assert [(t.name, list(t.dims)) for t in context.config.output] == [("y", [2, 16])]


def test_autocomplete_leaves_a_declared_config_alone(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_add_sub(tmp_path)
    context = context_for(model_dir)
    backend.complete_config(context)
    backend.unload(context)
    assert context.config.max_batch_size == 8
    assert [t.name for t in context.config.input] == ["INPUT0", "INPUT1"]


# ------------------------------------------------------------------ config vs model


def test_wrong_dtype_names_config_and_model_file(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_sub_with(
        tmp_path, "add_sub", '"INPUT1" data_type: TYPE_FP32', '"INPUT1" data_type: TYPE_INT32'
    )
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert error.code is ErrorCode.UNAVAILABLE
    assert str(error) == mismatch(
        context, "input 'INPUT1': config says TYPE_INT32, model has TYPE_FP32"
    )
    assert str(error) == (
        f"model 'add_sub' version 1: {model_dir}/config.pbtxt does not match "
        f"{model_dir}/1/model.onnx: input 'INPUT1': config says TYPE_INT32, model has TYPE_FP32"
    )


def test_wrong_shape_names_config_and_model_file(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_sub_with(
        tmp_path,
        "add_sub",
        '"OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ]',
        '"OUTPUT1" data_type: TYPE_FP32 dims: [ 4, 4 ]',
    )
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert str(error) == mismatch(
        context,
        "output 'OUTPUT1': config shape [-1, 4, 4] (max_batch_size 8) vs model shape [-1, 16]",
    )


def test_config_missing_a_model_input(tmp_path: Path, backend: Backend) -> None:
    model_dir = write_model(
        tmp_path,
        "add_sub",
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
        """,
    )
    build_add_sub(model_dir / "1" / "model.onnx")
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert str(error) == mismatch(
        context, "the model needs input(s) 'INPUT1', which the config does not declare"
    )


def test_config_input_the_model_lacks(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_sub_with(tmp_path, "add_sub", 'name: "INPUT1"', 'name: "INPUT_1"')
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert str(error) == mismatch(
        context, "input 'INPUT_1' is not in the model (its inputs: 'INPUT0', 'INPUT1')"
    )


def test_batching_config_for_a_model_with_a_fixed_first_dim(
    tmp_path: Path, backend: Backend
) -> None:
    model_dir = write_model(
        tmp_path,
        "fixed",
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 16 ] } ]
        """,
    )
    build_identity(model_dir / "1" / "model.onnx", [2, 16])
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert str(error) == mismatch(
        context,
        "input 'x': max_batch_size 4 needs a variable first dimension, "
        "but the model's shape is [2, 16]",
    )


def test_unbatched_config_matches_a_fixed_model(tmp_path: Path, backend: Backend) -> None:
    model_dir = write_model(
        tmp_path,
        "fixed",
        """
        platform: "onnxruntime_onnx"
        max_batch_size: 0
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 16 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 16 ] } ]
        """,
    )
    build_identity(model_dir / "1" / "model.onnx", [2, 16])
    context = context_for(model_dir)
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("fixed_0_0", "CPU"))
    data = np.arange(32, dtype=np.float32).reshape(2, 16)
    [response] = instance.execute([InferRequest("fixed", [Tensor("x", "FP32", data)])])
    instance.close()
    backend.unload(context)
    assert isinstance(response, InferResponse)
    np.testing.assert_array_equal(response.output("y").data, data)


def test_missing_model_file_is_unavailable(tmp_path: Path, backend: Backend) -> None:
    model_dir = write_model(tmp_path, "add_sub", ADD_SUB_CONFIG.format(name="add_sub"))
    (model_dir / "1").mkdir()
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert str(error) == (
        f"model 'add_sub' version 1: model file '{model_dir}/1/model.onnx' not found"
    )


def test_half_copied_model_file_is_unavailable(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_add_sub(tmp_path)
    model_file = model_dir / "1" / "model.onnx"
    model_file.write_bytes(model_file.read_bytes()[:100])
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, Unavailable)
    assert str(error).startswith(
        f"model 'add_sub' version 1: ONNX Runtime cannot load '{model_file}': "
    )
    assert "\n" not in str(error)


# ------------------------------------------------------------------ session options


def parameters(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


@pytest.mark.parametrize("key", ["intra_op_thread_count", "inter_op_thread_count"])
def test_thread_count_that_is_not_an_integer(tmp_path: Path, backend: Backend, key: str) -> None:
    model_dir = add_add_sub(tmp_path)
    with open(model_dir / "config.pbtxt", "a") as handle:
        handle.write(parameters(key, "four"))
    context = context_for(model_dir)

    error = complete_failure(backend, context)

    assert isinstance(error, InvalidArgument)
    assert str(error) == (
        f"model 'add_sub' version 1: parameter '{key}' must be an integer, got 'four'"
    )


def test_thread_counts_reach_the_session(tmp_path: Path, backend: Backend) -> None:
    model_dir = add_add_sub(tmp_path)
    with open(model_dir / "config.pbtxt", "a") as handle:
        handle.write(parameters("intra_op_thread_count", "2"))
        handle.write(parameters("inter_op_thread_count", "3"))
        handle.write(parameters("execution_mode", "1"))
    context = context_for(model_dir)
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))

    # No public accessor: the session's own options are the only witness.
    options = instance._session.get_session_options()
    instance.close()
    backend.unload(context)

    assert options.intra_op_num_threads == 2
    assert options.inter_op_num_threads == 3
    assert options.execution_mode == onnxruntime.ExecutionMode.ORT_PARALLEL


# ------------------------------------------------------------------ instances


def test_add_sub_instance_computes_sum_and_difference(tmp_path: Path, backend: Backend) -> None:
    context = context_for(add_add_sub(tmp_path))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))
    assert isinstance(instance, OnnxInstance)
    request, a, b = add_sub_request(batch=3)

    [response] = instance.execute([request])
    instance.close()
    backend.unload(context)

    assert isinstance(response, InferResponse)
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "req-7")
    assert [(t.name, t.datatype, t.data.shape) for t in response.outputs] == [
        ("OUTPUT0", "FP32", (3, 16)),
        ("OUTPUT1", "FP32", (3, 16)),
    ]
    np.testing.assert_allclose(response.output("OUTPUT0").data, a + b, rtol=1e-6)
    np.testing.assert_allclose(response.output("OUTPUT1").data, a - b, rtol=1e-6)


def test_instance_returns_only_the_requested_output(tmp_path: Path, backend: Backend) -> None:
    context = context_for(add_add_sub(tmp_path))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))
    request, a, b = add_sub_request()
    request.outputs = [RequestedOutput("OUTPUT1")]

    [response] = instance.execute([request])
    instance.close()
    backend.unload(context)

    assert [t.name for t in response.outputs] == ["OUTPUT1"]
    np.testing.assert_allclose(response.output("OUTPUT1").data, a - b, rtol=1e-6)


def test_runtime_failure_fails_only_its_request(tmp_path: Path, backend: Backend) -> None:
    context = context_for(add_add_sub(tmp_path))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))
    good, _, _ = add_sub_request()
    bad = InferRequest(
        "add_sub",
        inputs=[
            Tensor("INPUT0", "FP32", np.zeros((2, 8), np.float32)),
            Tensor("INPUT1", "FP32", np.zeros((2, 8), np.float32)),
        ],
    )

    results = instance.execute([bad, good])
    instance.close()
    backend.unload(context)

    assert isinstance(results[0], EdgeboxError)
    assert str(results[0]).startswith("model 'add_sub' version 1: ONNX Runtime failed: ")
    assert isinstance(results[1], InferResponse)


def test_gpu_instance_without_cuda_runs_on_the_cpu_with_a_note(
    tmp_path: Path, backend: Backend, cpu_only: None, caplog: pytest.LogCaptureFixture
) -> None:
    model_dir = add_add_sub(tmp_path)
    with open(model_dir / "config.pbtxt", "a") as handle:
        handle.write("instance_group [ { kind: KIND_GPU count: 2 } ]\n")
    context = context_for(model_dir)
    backend.complete_config(context)

    with caplog.at_level(logging.WARNING, logger="edgebox.backends.onnxruntime"):
        instances = [
            backend.load_instance(context, InstanceSpec(f"add_sub_0_{i}", "GPU", device_id=0))
            for i in range(2)
        ]
    request, a, b = add_sub_request()
    results = [instance.execute([request])[0] for instance in instances]
    providers = [instance._session.get_providers() for instance in instances]
    for instance in instances:
        instance.close()
    backend.unload(context)

    assert context.notes == [CUDA_NOTE]
    assert caplog.messages == [f"model 'add_sub' version 1: {CUDA_NOTE}"]
    assert providers == [["CPUExecutionProvider"], ["CPUExecutionProvider"]]
    for result in results:
        assert isinstance(result, InferResponse)
        np.testing.assert_allclose(result.output("OUTPUT0").data, a + b, rtol=1e-6)


def test_cpu_instance_has_no_note(tmp_path: Path, backend: Backend, cpu_only: None) -> None:
    context = context_for(add_add_sub(tmp_path))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))
    instance.close()
    backend.unload(context)
    assert context.notes == []


def test_idle_worker_threads_do_not_spin_by_default(tmp_path: Path) -> None:
    from edgebox.backends.onnxruntime.session_options import session_options as _session_options

    context = context_for(add_add_sub(tmp_path, "quiet"))
    options = _session_options(onnxruntime, context)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_session_parameters_pass_through_to_onnxruntime(tmp_path: Path) -> None:
    from edgebox.backends.onnxruntime.session_options import session_options as _session_options

    model_dir = add_add_sub(tmp_path, "busy")
    config = model_dir / "config.pbtxt"
    config.write_text(
        config.read_text()
        + 'parameters { key: "session.intra_op.allow_spinning" value: { string_value: "1" } }\n'
        + 'parameters { key: "session.set_denormal_as_zero" value: { string_value: "1" } }\n'
    )
    options = _session_options(onnxruntime, context_for(model_dir))
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.set_denormal_as_zero") == "1"


def test_a_dynamic_batch_runs_as_one_session_call_and_splits_back(tmp_path: Path, backend: Backend) -> None:
    context = context_for(add_add_sub(tmp_path))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("add_sub_0_0", "CPU"))
    calls = []
    real_run = instance._session.run
    instance._session.run = lambda names, feeds: calls.append(feeds["INPUT0"].shape) or real_run(names, feeds)
    a1, a2 = np.arange(16, dtype=np.float32).reshape(1, 16), np.full((2, 16), 3, np.float32)
    b1, b2 = np.ones((1, 16), np.float32), np.ones((2, 16), np.float32)
    first = InferRequest("add_sub", [Tensor("INPUT0", "FP32", a1), Tensor("INPUT1", "FP32", b1)], id="1",
                         outputs=[RequestedOutput("OUTPUT1")])
    second = InferRequest("add_sub", [Tensor("INPUT0", "FP32", a2), Tensor("INPUT1", "FP32", b2)], id="2")

    results = instance.execute([first, second])
    instance.close()
    backend.unload(context)

    assert calls == [(3, 16)]
    assert [r.id for r in results] == ["1", "2"]
    np.testing.assert_array_equal(results[0].output("OUTPUT1").data, a1 - b1)
    np.testing.assert_array_equal(results[1].output("OUTPUT0").data, a2 + b2)
    np.testing.assert_array_equal(results[1].output("OUTPUT1").data, a2 - b2)
