"""Models and video files for the stream tests: python-backend models that
take one BGR frame (UINT8 [-1,-1,3]), written into a repository under
tmp_path, and real MJPG files written with OpenCV."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from model_fixtures import write_model

FRAME_MODEL_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "image" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] }} ]
output [
  {{ name: "level" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "size" data_type: TYPE_INT32 dims: [ 2 ] }}
]
"""
"""A frame in; the frame's mean level (all frames in the tests are flat
grey) and its height and width out."""

PROBE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            level = np.array([round(float(image.mean()))], dtype=np.int32)
            size = np.array(image.shape[:2], dtype=np.int32)
            out.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("level", level), pb_utils.Tensor("size", size)]))
        return out
"""

GATED_PROBE = """
import numpy as np
import triton_python_backend_utils as pb_utils
from fakes import blocking_gate


class TritonPythonModel:
    def execute(self, requests):
        blocking_gate.entered.set()
        assert blocking_gate.release.wait(20), "the test never released the gate"
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        level = np.array([round(float(image.mean()))], dtype=np.int32)
        size = np.array(image.shape[:2], dtype=np.int32)
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("level", level), pb_utils.Tensor("size", size)])]
"""

PAIR_CONFIG = FRAME_MODEL_CONFIG + """
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
"""
"""Two instances, so two frames can be inside the model at once."""

HOLDS_DARK_FRAMES = """
import numpy as np
import triton_python_backend_utils as pb_utils
from fakes import blocking_gate


class TritonPythonModel:
    def execute(self, requests):
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        level = round(float(image.mean()))
        if level < 100:
            blocking_gate.entered.set()
            assert blocking_gate.release.wait(20), "the test never released the gate"
        else:
            blocking_gate.finalized.append(str(level))
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("level", np.array([level], dtype=np.int32)),
            pb_utils.Tensor("size", np.array(image.shape[:2], dtype=np.int32))])]
"""
"""Holds a dark frame until the test releases it; lets bright ones through
and notes each in ``blocking_gate.finalized``."""

SLOW_PROBE = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.005)  # a model slower than decoding a 64x48 frame
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        level = np.array([round(float(image.mean()))], dtype=np.int32)
        size = np.array(image.shape[:2], dtype=np.int32)
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("level", level), pb_utils.Tensor("size", size)])]
"""

FAILING_ON_DARK = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        if image.mean() < 100:
            raise RuntimeError("too dark to see")
        level = np.array([round(float(image.mean()))], dtype=np.int32)
        size = np.array(image.shape[:2], dtype=np.int32)
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("level", level), pb_utils.Tensor("size", size)])]
"""

LANES_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "image" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] }} ]
output [
  {{ name: "lane_scores" data_type: TYPE_FP32 dims: [ -1 ] }},
  {{ name: "lane_points" data_type: TYPE_FP32 dims: [ -1, 2 ] }},
  {{ name: "lane_point_counts" data_type: TYPE_INT32 dims: [ -1 ] }}
]
parameters {{ key: "result_summary" value {{ string_value: "lanes" }} }}
"""

FAKE_LANES = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        height, width = image.shape[:2]
        left = [[0.25 * width, height - 1.0], [0.45 * width, height / 2]]
        right = [[0.75 * width, height - 1.0], [0.6 * width, height / 2], [0.55 * width, height / 3]]
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("lane_scores", np.array([0.9, 0.75], dtype=np.float32)),
            pb_utils.Tensor("lane_points", np.array(left + right, dtype=np.float32)),
            pb_utils.Tensor("lane_point_counts", np.array([2, 3], dtype=np.int32)),
        ])]
"""

FP32_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "pixels" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""


def write_frame_model(repository: Path, name: str, model_py: str = PROBE, version: int = 1):
    return write_model(
        repository, name, FRAME_MODEL_CONFIG.format(name=name), {f"{version}/model.py": model_py}
    )


def write_video(path: Path, levels: list[int], width: int = 64, height: int = 48) -> Path:
    """A real MJPG .avi whose frame k is flat grey at ``levels[k]``."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, (width, height))
    assert writer.isOpened(), "OpenCV cannot write MJPG here"
    for level in levels:
        writer.write(np.full((height, width, 3), level, dtype=np.uint8))
    writer.release()
    return path


def level_of(image: np.ndarray) -> int:
    """A decoded frame's grey level, rounded to the nearest 10 (MJPG is lossy)."""
    return int(round(float(image.mean()) / 10.0) * 10)
