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


# -- warm-up files stay in <model>/warmup and are read only at their expected size


def _from_file_config(filename: str, datatype: str = "TYPE_FP32") -> str:
    return f"""
        model_warmup [ {{ name: "w" batch_size: 1
                         inputs {{ key: "X" value: {{ data_type: {datatype} dims: [ 2 ] input_data_file: "{filename}" }} }} }} ]"""


@pytest.mark.parametrize("filename", ["/etc/shadow", "/dev/zero", "../../secret.bin"])
def test_warmup_file_outside_the_warmup_folder_is_refused_unread(tmp_path, stack, filename):
    model(tmp_path, "nosy", _from_file_config(filename))
    with pytest.raises(EdgeboxError) as info:
        stack.manager.load_model("nosy")
    assert str(info.value) == (
        f"{tmp_path / 'nosy' / 'config.pbtxt'}:7:24: model_warmup 'w', input 'X': input_data_file "
        f"'{filename}' is outside the model's warmup folder"
    )
    assert "bytes" not in str(info.value)
    assert execute_counter.requests_seen["nosy"] == 0


def test_warmup_symlink_leading_out_of_the_warmup_folder_is_refused(tmp_path, stack):
    model(tmp_path, "linked", _from_file_config("zero.bin"), {"1/data.bin": b"\x00" * 8})
    (tmp_path / "linked" / "warmup").mkdir()
    (tmp_path / "linked" / "warmup" / "zero.bin").symlink_to("/dev/zero")
    (tmp_path / "linked" / "warmup" / "sibling.bin").symlink_to("../1/data.bin")
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("linked")
    assert stack.registry.statuses("linked")[1].reason == (
        "model 'linked' version 1: warmup 'w', input 'X': input_data_file 'zero.bin' is outside "
        "the model's warmup folder (a symlink leads out)"
    )
    config = tmp_path / "linked" / "config.pbtxt"
    config.write_text(config.read_text().replace("zero.bin", "sibling.bin"))
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("linked")
    assert stack.registry.statuses("linked")[1].reason.endswith(
        "input_data_file 'sibling.bin' is outside the model's warmup folder (a symlink leads out)"
    )


def test_warmup_fifo_is_refused_without_blocking(tmp_path, stack):
    import os
    import threading

    model(tmp_path, "piped", _from_file_config("pipe.bin"))
    (tmp_path / "piped" / "warmup").mkdir()
    fifo = tmp_path / "piped" / "warmup" / "pipe.bin"
    os.mkfifo(fifo)
    loader = threading.Thread(target=lambda: _load_quietly(stack, "piped"), daemon=True)
    loader.start()
    loader.join(10)
    if loader.is_alive():
        with open(fifo, "wb"):  # lets the blocked reader finish
            pass
        pytest.fail("loading blocked on a FIFO named as warm-up data")
    assert stack.registry.statuses("piped")[1].reason == (
        f"model 'piped' version 1: warmup 'w', input 'X': '{fifo}' is not a regular file"
    )


def test_oversized_warmup_file_is_refused_before_it_is_read(tmp_path, stack):
    import tracemalloc

    model(tmp_path, "huge", _from_file_config("huge.bin"))
    (tmp_path / "huge" / "warmup").mkdir()
    huge = tmp_path / "huge" / "warmup" / "huge.bin"
    with open(huge, "wb") as handle:
        handle.truncate(256 << 20)  # sparse; reading it would allocate 256 MiB
    tracemalloc.start()
    try:
        with pytest.raises(EdgeboxError):
            stack.manager.load_model("huge")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert stack.registry.statuses("huge")[1].reason.endswith(
        f"'{huge}' holds {256 << 20} bytes, shape [1, 2] of FP32 needs 8"
    )


def test_bytes_warmup_file_has_a_size_limit(tmp_path, stack, monkeypatch):
    from edgebox.lifecycle import warmup

    monkeypatch.setattr(warmup, "MAX_BYTES_FILE", 16)
    write_model(
        tmp_path,
        "text",
        """
        name: "text"
        backend: "python"
        max_batch_size: 1
        input [ { name: "X" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "Y" data_type: TYPE_STRING dims: [ 1 ] } ]
        model_warmup [ { name: "w" batch_size: 1
                         inputs { key: "X" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "big.bin" } } } ]
        """,
        {"1/model.py": COUNTING_MODEL, "warmup/big.bin": b"\x20\x00\x00\x00" + b"x" * 32},
    )
    with pytest.raises(EdgeboxError):
        stack.manager.load_model("text")
    assert stack.registry.statuses("text")[1].reason.endswith(
        "big.bin' holds 36 bytes, more than the 16 allowed"
    )


def test_warmup_file_of_the_right_size_still_feeds_the_model(tmp_path, stack):
    model(
        tmp_path,
        "fed",
        _from_file_config("ok.bin"),
        {"warmup/ok.bin": np.array([1, 2], dtype=np.float32).tobytes()},
    )
    stack.manager.load_model("fed")
    assert execute_counter.requests_seen["fed"] == 1


def _load_quietly(stack, name):
    try:
        stack.manager.load_model(name)
    except EdgeboxError:
        pass
