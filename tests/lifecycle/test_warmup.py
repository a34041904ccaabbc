"""model_warmup runs for real before a version takes traffic."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.errors import EdgeboxError
from edgebox.lifecycle.states import ModelState
from fakes import execute_counter
from model_fixtures import write_model

COUNTING_MODEL = """
import triton_python_backend_utils as pb_utils
from fakes import execute_counter


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            execute_counter.requests_seen[self.name] += 1
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                raise ValueError("negative input")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)]))
        return responses
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
{warmup}
"""


@pytest.fixture(autouse=True)
def fresh_counter():
    execute_counter.requests_seen.clear()


def model(tmp_path, name: str, warmup: str, files: dict | None = None):
    write_model(tmp_path, name, CONFIG.format(name=name, warmup=warmup), {"1/model.py": COUNTING_MODEL, **(files or {})})


def test_warmup_runs_before_the_version_is_ready_and_is_not_counted(tmp_path, stack):
    model(tmp_path, "warm", """
        model_warmup [ { name: "zeros" batch_size: 2 count: 3
                         inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]""")
    stack.manager.load_model("warm")
    assert execute_counter.requests_seen["warm"] == 3
    stats = stack.dataplane.statistics("warm")["model_stats"][0]
    assert stats["inference_count"] == 0
    assert stats["inference_stats"]["success"]["count"] == 0
    response = stack.dataplane.infer(_request("warm", [[1.0, 2.0]]))
    np.testing.assert_array_equal(response.outputs[0].data, [[1.0, 2.0]])


def test_failing_warmup_leaves_the_version_unavailable_with_the_reason(tmp_path, stack):
    model(tmp_path, "cold", """
        model_warmup [ { name: "from_file" batch_size: 1
                         inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "negative.bin" } } } ]""",
        {"warmup/negative.bin": np.array([-1, 1], dtype=np.float32).tobytes()})
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("cold")
    status = stack.registry.statuses("cold")[1]
    assert status.state is ModelState.UNAVAILABLE
    assert status.reason.startswith("model 'cold' version 1: warmup 'from_file' failed: model 'cold' version 1: execute() raised ValueError: negative input")
    assert not stack.registry.is_ready("cold")


def test_warmup_file_must_hold_the_declared_shape(tmp_path, stack):
    model(tmp_path, "short", """
        model_warmup [ { name: "w" batch_size: 1
                         inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "short.bin" } } } ]""",
        {"warmup/short.bin": b"\x00" * 4})
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("short")
    reason = stack.registry.statuses("short")[1].reason
    assert reason.endswith("warmup/short.bin' holds 4 bytes, shape [1, 2] of FP32 needs 8")


def test_warmup_input_must_match_the_config(tmp_path, stack):
    model(tmp_path, "wrong", """
        model_warmup [ { name: "w" batch_size: 1
                         inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } } } ]""")
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("wrong")
    assert stack.registry.statuses("wrong")[1].reason == (
        "model 'wrong' version 1: warmup 'w', input 'X': expected datatype FP32, got INT32"
    )


def _request(name, rows):
    from edgebox.tensors import InferRequest, Tensor

    return InferRequest(name, [Tensor("X", "FP32", np.asarray(rows, dtype=np.float32))])
