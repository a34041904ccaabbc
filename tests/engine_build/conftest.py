"""Fixtures for the build-engine tests: fake TensorRT and pycuda, small ONNX
files, and a repository whose ensemble feeds the engine's model from a python
preprocessing model (the demo's lane_pipeline in miniature)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from fakes.fake_tensorrt_builder import FakeCudaDriver, FakeTensorRT
from model_fixtures import write_model

TINY_SHAPE = (3, 4, 6)
"""CHW of the tiny detector's input; calibration images are 4x6 pixels."""

PREPROCESS_CONFIG = """
name: "pre"
backend: "python"
max_batch_size: 0
input [ { name: "image" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] } ]
output [ { name: "tensor" data_type: TYPE_FP32 dims: [ 1, 3, -1, -1 ] } ]
"""

PREPROCESS_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            chw = image[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0
            tensor = pb_utils.Tensor("tensor", np.ascontiguousarray(chw[np.newaxis]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        return responses
"""
"""BGR HxWx3 uint8 -> RGB 1x3xHxW float32 in [0, 1]."""

PIPELINE_CONFIG = """
name: "pipe"
platform: "ensemble"
max_batch_size: 0
input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ -1, 3, 4, 6 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "pre"
      model_version: -1
      input_map { key: "image" value: "IMAGE" }
      output_map { key: "tensor" value: "preprocessed" }
    },
    {
      model_name: "det"
      model_version: -1
      input_map { key: "input" value: "preprocessed" }
      output_map { key: "output" value: "SCORES" }
    }
  ]
}
"""


def build_tiny_detector(
    path: Path,
    input_name: str = "input",
    batch: str | int = "batch",
    op: str = "Relu",
) -> Path:
    """``input`` [batch, 3, 4, 6] FP32 -> ``op`` -> ``output`` of the same shape."""
    shape = [batch, *TINY_SHAPE]
    graph = helper.make_graph(
        [helper.make_node(op, [input_name], ["output"], name=f"{op.lower()}_0")],
        "tiny_detector",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def add_preprocessing(repository: Path) -> None:
    write_model(repository, "pre", PREPROCESS_CONFIG, {"1/model.py": PREPROCESS_MODEL})
    write_model(repository, "pipe", PIPELINE_CONFIG)
    (repository / "pipe" / "1").mkdir(exist_ok=True)


@pytest.fixture
def fake_cuda() -> FakeCudaDriver:
    return FakeCudaDriver()


@pytest.fixture
def fake_trt(fake_cuda: FakeCudaDriver) -> FakeTensorRT:
    return FakeTensorRT(fake_cuda)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def make_detector():
    """``build_tiny_detector``, for tests that need a variant."""
    return build_tiny_detector


@pytest.fixture
def tiny_onnx(tmp_path: Path) -> Path:
    return build_tiny_detector(tmp_path / "build" / "det.onnx")


@pytest.fixture
def pipeline_repo(repo: Path) -> Path:
    """``repo`` with the python model 'pre' feeding 'det' in the ensemble 'pipe'."""
    add_preprocessing(repo)
    return repo
