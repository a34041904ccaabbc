"""Small ONNX models built with the ``onnx`` helper API, deterministic, for the
demo repository, the tests and the benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
"""Old enough for the onnxruntime builds NVIDIA ships for JetPack 5 and 6."""


def _save(model: onnx.ModelProto, path: Path) -> Path:
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def build_add_sub(path: Path, width: int = 16, elem_type: int = TensorProto.FLOAT) -> Path:
    """INPUT0, INPUT1 [batch, width] -> OUTPUT0 = sum, OUTPUT1 = difference
    (Triton's classic example model)."""

    def io(name: str):
        return helper.make_tensor_value_info(name, elem_type, ["batch", width])

    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        [io("INPUT0"), io("INPUT1")],
        [io("OUTPUT0"), io("OUTPUT1")],
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


LANE_INPUT_SHAPE = (3, 360, 640)
LANE_ANCHORS = 2784
LANE_VALUES = 77


def build_lane_model(path: Path, seed: int = 0) -> Path:
    """A LaneATT-shaped network: ``input`` [batch, 3, 360, 640] FP32 ->
    ``predict_lanes`` [batch, 2784, 77]. Strided convolutions shrink the image to
    a 48x58 grid (2784 anchors) and a 1x1 convolution gives 77 values per anchor:
    the I/O and the compute profile of a lane detector, with fixed random weights."""
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:]))
        data = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        return numpy_helper.from_array(data, name)

    initializers = [
        weight("w1", (16, 3, 8, 8)),
        weight("w2", (32, 16, 3, 3)),
        weight("w3", (LANE_VALUES, 32, 1, 1)),
        numpy_helper.from_array(np.array([48, 58], dtype=np.int64), "grid"),
        numpy_helper.from_array(np.array([0, LANE_VALUES, LANE_ANCHORS], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], strides=[8, 8]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Shape", ["r2"], ["s"], start=0, end=2),
        helper.make_node("Concat", ["s", "grid"], ["size"], axis=0),
        helper.make_node("Resize", ["r2", "", "", "size"], ["g"], mode="linear"),
        helper.make_node("Conv", ["g", "w3"], ["c3"]),
        helper.make_node("Reshape", ["c3", "flat"], ["f"]),
        helper.make_node("Transpose", ["f"], ["predict_lanes"], perm=[0, 2, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "lane_detector",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *LANE_INPUT_SHAPE])],
        [
            helper.make_tensor_value_info(
                "predict_lanes", TensorProto.FLOAT, ["batch", LANE_ANCHORS, LANE_VALUES]
            )
        ],
        initializers,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
