"""The ONNX Runtime backend with ``sequence_batching``: the control and state
inputs the scheduler adds are checked against the model like declared tensors,
and the instance takes them and returns the state outputs asked for by name.

The models are the ones scripts/sequence_onnx.py writes (Triton's
simple_sequence, simple_dyna_sequence and an implicit-state accumulator); the
control and state tensors are built here by hand, as the sequence batcher
would build them, so no scheduler runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.onnxruntime import Backend
from edgebox.backends.onnxruntime.instance import OnnxInstance
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor
from scripts.onnx_builders import IR_VERSION, OPSET
from scripts.sequence_onnx import (
    build_implicit_accumulator,
    build_simple_dyna_sequence,
    build_simple_sequence,
)


def context_for(model_dir: Path) -> ModelContext:
    config = read_model_config(model_dir)
    return ModelContext(model_dir.name, 1, config, model_dir, model_dir / "1")


def loaded(backend: Backend, model_dir: Path) -> tuple[ModelContext, OnnxInstance]:
    context = context_for(model_dir)
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec(f"{model_dir.name}_0", "CPU"))
    return context, instance


def column(values: list[int], dtype=np.int32) -> np.ndarray:
    return np.array(values, dtype=dtype).reshape(-1, 1)


def run(instance: OnnxInstance, request: InferRequest) -> InferResponse:
    [response] = instance.execute([request])
    assert isinstance(response, InferResponse), response
    return response


def failure(model_dir: Path) -> str:
    backend = Backend()
    context = context_for(model_dir)
    with pytest.raises(EdgeboxError) as info:
        backend.complete_config(context)
    backend.unload(context)
    assert isinstance(info.value, Unavailable)
    return str(info.value)


def mismatch(model_dir: Path, text: str) -> str:
    where = context_for(model_dir).where
    return (
        f"{where}: {model_dir / 'config.pbtxt'} does not match "
        f"{model_dir / '1' / 'model.onnx'}: {text}"
    )


def test_simple_sequence_adds_start_to_the_input(tmp_path: Path) -> None:
    backend = Backend()
    context, instance = loaded(backend, build_simple_sequence(tmp_path / "simple_sequence"))
    assert [t.name for t in context.config.input] == ["INPUT"]

    def request(value: int, start: int) -> InferRequest:
        inputs = [
            Tensor("INPUT", "INT32", column([value])),
            Tensor("START", "INT32", column([start])),
            Tensor("READY", "INT32", column([1])),
        ]
        return InferRequest("simple_sequence", inputs)

    first = run(instance, request(100, 1))
    later = run(instance, request(-7, 0))

    assert [(t.name, t.datatype) for t in first.outputs] == [("OUTPUT", "INT32")]
    assert first.output("OUTPUT").data.tolist() == [[101]]
    assert later.output("OUTPUT").data.tolist() == [[-7]]


def test_simple_dyna_sequence_adds_the_correlation_id_on_end(tmp_path: Path) -> None:
    backend = Backend()
    _, instance = loaded(backend, build_simple_dyna_sequence(tmp_path / "simple_dyna_sequence"))
    inputs = [
        Tensor("INPUT", "INT32", column([0, 11, 1])),
        Tensor("START", "INT32", column([1, 0, 0])),
        Tensor("END", "INT32", column([0, 0, 1])),
        Tensor("READY", "INT32", column([1, 1, 1])),
        Tensor("CORRID", "UINT64", column([1000, 1000, 1000], np.uint64)),
    ]

    response = run(instance, InferRequest("simple_dyna_sequence", inputs))

    assert response.output("OUTPUT").data.tolist() == [[1], [11], [1001]]


def test_implicit_state_accumulates_and_is_returned_by_name(tmp_path: Path) -> None:
    backend = Backend()
    model_dir = build_implicit_accumulator(tmp_path / "accumulator")
    context, instance = loaded(backend, model_dir)
    assert [t.name for t in context.config.input] == ["INPUT"]
    assert [t.name for t in context.config.output] == ["OUTPUT"]

    def step(value: int, start: int, ready: int, state: int) -> InferResponse:
        inputs = [
            Tensor("INPUT", "INT32", column([value])),
            Tensor("START", "INT32", column([start])),
            Tensor("READY", "INT32", column([ready])),
            Tensor("INPUT_STATE", "INT32", column([state])),
        ]
        outputs = [RequestedOutput("OUTPUT"), RequestedOutput("OUTPUT_STATE")]
        return run(instance, InferRequest("accumulator", inputs, outputs=outputs))

    first = step(5, 1, 1, 99)
    second = step(3, 0, 1, int(first.output("OUTPUT_STATE").data[0, 0]))
    null = step(8, 0, 0, 42)

    assert [(t.name, t.datatype) for t in first.outputs] == [
        ("OUTPUT", "INT32"),
        ("OUTPUT_STATE", "INT32"),
    ]
    assert first.output("OUTPUT").data.tolist() == [[5]]
    assert second.output("OUTPUT").data.tolist() == [[8]]
    assert second.output("OUTPUT_STATE").data.tolist() == [[8]]
    assert null.output("OUTPUT_STATE").data.tolist() == [[42]]


def test_a_batch_of_sequence_requests_keeps_the_state_output(tmp_path: Path) -> None:
    backend = Backend()
    _, instance = loaded(backend, build_implicit_accumulator(tmp_path / "accumulator"))

    def request(value: int, state: int) -> InferRequest:
        inputs = [
            Tensor("INPUT", "INT32", column([value])),
            Tensor("START", "INT32", column([0])),
            Tensor("READY", "INT32", column([1])),
            Tensor("INPUT_STATE", "INT32", column([state])),
        ]
        outputs = [RequestedOutput("OUTPUT"), RequestedOutput("OUTPUT_STATE")]
        return InferRequest("accumulator", inputs, outputs=outputs)

    responses = instance.execute([request(1, 10), request(2, 20)])

    assert [r.output("OUTPUT_STATE").data.tolist() for r in responses] == [[[11]], [[22]]]


def test_a_control_whose_model_type_differs_is_refused(tmp_path: Path) -> None:
    model_dir = build_simple_sequence(tmp_path / "simple_sequence")
    config = model_dir / "config.pbtxt"
    text = config.read_text()
    config.write_text(
        text.replace(
            "kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ]",
            "kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ]",
        )
    )

    assert failure(model_dir) == mismatch(
        model_dir, "sequence control 'READY': config says TYPE_FP32, model has TYPE_INT32"
    )


def test_a_state_whose_model_type_differs_is_refused(tmp_path: Path) -> None:
    model_dir = build_implicit_accumulator(tmp_path / "accumulator")
    config = model_dir / "config.pbtxt"
    config.write_text(
        config.read_text().replace("      data_type: TYPE_INT32\n", "      data_type: TYPE_INT64\n")
    )

    assert failure(model_dir) == mismatch(
        model_dir, "state input 'INPUT_STATE': config says TYPE_INT64, model has TYPE_INT32"
    )


def test_a_control_the_model_lacks_is_refused(tmp_path: Path) -> None:
    model_dir = build_simple_sequence(tmp_path / "simple_sequence")
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "READY"', 'name: "READY_FLAG"'))

    assert failure(model_dir) == mismatch(
        model_dir,
        "sequence control 'READY_FLAG' is not in the model (its inputs: 'INPUT', 'START', 'READY')",
    )


def test_a_control_with_a_wider_model_shape_is_refused(tmp_path: Path) -> None:
    model_dir = build_simple_sequence(tmp_path / "wide")
    model_path = model_dir / "1" / "model.onnx"
    model = onnx.load(str(model_path))
    start = next(i for i in model.graph.input if i.name == "START")
    start.type.tensor_type.shape.dim[1].dim_value = 2
    onnx.save(model, str(model_path))

    assert failure(model_dir) == mismatch(
        model_dir, "sequence control 'START': model shape [-1, 2], expected [-1, 1] or [-1]"
    )


def test_a_batched_control_without_a_trailing_one_is_flattened(tmp_path: Path) -> None:
    """A model taking START as [batch] gets the [batch, 1] the scheduler sends, flattened."""
    model_dir = build_simple_sequence(tmp_path / "flat")
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["START", "axes"], ["start_column"]),
            helper.make_node("Add", ["INPUT", "start_column"], ["OUTPUT"]),
        ],
        "flat_start",
        [
            helper.make_tensor_value_info("INPUT", TensorProto.INT32, ["batch", 1]),
            helper.make_tensor_value_info("START", TensorProto.INT32, ["batch"]),
            helper.make_tensor_value_info("READY", TensorProto.INT32, ["batch", 1]),
        ],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.INT32, ["batch", 1])],
        [onnx.numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.save(model, str(model_dir / "1" / "model.onnx"))
    _, instance = loaded(Backend(), model_dir)
    inputs = [
        Tensor("INPUT", "INT32", column([4, 6])),
        Tensor("START", "INT32", column([1, 0])),
        Tensor("READY", "INT32", column([1, 1])),
    ]

    response = run(instance, InferRequest("flat", inputs))

    assert response.output("OUTPUT").data.tolist() == [[5], [6]]


def test_autocomplete_leaves_controls_and_states_out_of_the_config(tmp_path: Path) -> None:
    model_dir = build_implicit_accumulator(tmp_path / "accumulator")
    config = model_dir / "config.pbtxt"
    text = config.read_text()
    config.write_text(text[: text.index("\ninput [") + 1])
    context = context_for(model_dir)
    backend = Backend()

    backend.complete_config(context)
    backend.unload(context)

    assert [(t.name, list(t.dims)) for t in context.config.input] == [("INPUT", [1])]
    assert [(t.name, list(t.dims)) for t in context.config.output] == [("OUTPUT", [1])]
