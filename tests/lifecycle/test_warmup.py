"""model_warmup runs for real before a version takes traffic."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from google.protobuf import json_format, text_format

from daemon_process import wait_for
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.repository import tensor_file
from edgebox.repository.config import ModelConfig
from fakes import blocking_gate, execute_counter
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
    (stats,) = stack.dataplane.statistics("warm")
    assert stats.counts.inference_count == 0
    assert stats.counts.inference_stats.success.count == 0
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


GATED_MODEL = """
import triton_python_backend_utils as pb_utils
from fakes import blocking_gate, execute_counter


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        execute_counter.requests_seen[self.name] += len(requests)
        blocking_gate.entered.set()
        assert blocking_gate.release.wait(10), "test never released the gate"
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""

LONG_WARMUP = """
    model_warmup [ { name: "w" batch_size: 1 count: 500
                     inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]"""


def test_warmup_over_the_request_cap_is_refused_before_any_request_runs(tmp_path, limited_stack):
    stack = limited_stack(max_warmup_requests=5)
    model(tmp_path, "greedy", """
        model_warmup [
          { name: "a" batch_size: 1 count: 4
            inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } },
          { name: "b" batch_size: 1 count: 2
            inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]""")
    with pytest.raises(InvalidArgument) as info:
        stack.manager.load_model("greedy")
    expected = (
        "model 'greedy': model_warmup asks for 6 requests in all (the sum of every entry's "
        "count), more than the 5 allowed (setting 'max_warmup_requests')"
    )
    assert str(info.value) == expected
    assert execute_counter.requests_seen["greedy"] == 0
    status = stack.registry.statuses("greedy")[None]
    assert (status.state, status.reason) == (ModelState.UNAVAILABLE, expected)


def test_warmup_override_over_the_cap_is_refused_and_changes_nothing(tmp_path, limited_stack):
    stack = limited_stack(max_warmup_requests=5)
    model(tmp_path, "kept", "")
    stack.manager.load_model("kept")
    override = text_format.Parse(
        CONFIG.format(name="kept", warmup=LONG_WARMUP), ModelConfig()
    )
    with pytest.raises(InvalidArgument, match=r"^load failed for model 'kept': model_warmup asks for 500 "):
        stack.repository_control.load_model("kept", {"config": json_format.MessageToJson(override)})
    assert execute_counter.requests_seen["kept"] == 0
    assert stack.registry.statuses("kept") == {1: VersionStatus(ModelState.READY)}
    assert not stack.manager.config_of("kept").model_warmup


def _load_in_background(stack, name: str) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def load() -> None:
        try:
            stack.manager.load_model(name)
            outcome["loaded"] = True
        except EdgeboxError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=load, name=f"load-{name}")
    thread.start()
    assert blocking_gate.entered.wait(10), "the warm-up never reached the model"
    return thread, outcome


def _state(stack, name: str) -> ModelState | None:
    status = stack.registry.statuses(name).get(1)
    return status.state if status else None


def test_unload_stops_a_running_warmup_between_requests(tmp_path, stack):
    model(tmp_path, "slow_warm", LONG_WARMUP, {"1/model.py": GATED_MODEL})
    loader, outcome = _load_in_background(stack, "slow_warm")
    unloader = threading.Thread(target=stack.manager.unload_model, args=("slow_warm",))
    unloader.start()
    wait_for(lambda: _state(stack, "slow_warm") is ModelState.UNLOADING, 5, what="UNLOADING")
    blocking_gate.release.set()
    unloader.join(10)
    loader.join(10)
    expected = "model 'slow_warm' version 1: warmup 'w' stopped after 1 of 500 requests: unloaded"
    assert str(outcome["error"]) == expected
    assert execute_counter.requests_seen["slow_warm"] == 1
    assert stack.registry.statuses("slow_warm")[1] == VersionStatus(ModelState.UNAVAILABLE, expected)
    assert not stack.registry.is_ready("slow_warm")


def test_shutdown_stops_a_running_warmup(tmp_path, stack):
    model(tmp_path, "slow_warm", LONG_WARMUP, {"1/model.py": GATED_MODEL})
    loader, outcome = _load_in_background(stack, "slow_warm")
    done: dict = {}
    stopper = threading.Thread(
        target=lambda: done.update(drained=stack.manager.unload_all(timeout_s=10))
    )
    stopper.start()
    wait_for(lambda: _state(stack, "slow_warm") is ModelState.UNLOADING, 5, what="UNLOADING")
    blocking_gate.release.set()
    stopper.join(10)
    loader.join(10)
    assert done == {"drained": True}
    assert str(outcome["error"]) == (
        "model 'slow_warm' version 1: warmup 'w' stopped after 1 of 500 requests: "
        "server shutting down"
    )
    assert execute_counter.requests_seen["slow_warm"] == 1
    with pytest.raises(Unavailable, match=r"^model 'other': not loaded: server shutting down$"):
        stack.manager.load_model("other")


def test_shutdown_gives_up_on_a_stuck_load_at_its_deadline(tmp_path, stack):
    model(tmp_path, "stuck", LONG_WARMUP, {"1/model.py": GATED_MODEL})
    model(tmp_path, "fine", "")
    stack.manager.load_model("fine")
    loader, outcome = _load_in_background(stack, "stuck")
    started = time.monotonic()
    assert stack.manager.unload_all(timeout_s=0.5) is False
    assert time.monotonic() - started < 5
    assert not stack.registry.is_ready("fine"), "the free model was not unloaded"
    blocking_gate.release.set()
    loader.join(10)
    assert str(outcome["error"]).endswith("stopped after 1 of 500 requests: server shutting down")
    assert not stack.registry.is_ready("stuck"), "a load that ended after shutdown was published"


def test_other_models_load_and_unload_while_one_warms_up(tmp_path, stack):
    model(tmp_path, "slow_warm", LONG_WARMUP, {"1/model.py": GATED_MODEL})
    model(tmp_path, "quick", "")
    loader, outcome = _load_in_background(stack, "slow_warm")
    try:
        for operation in (stack.manager.load_model, stack.manager.unload_model):
            worker = threading.Thread(target=operation, args=("quick",))
            worker.start()
            worker.join(5)
            assert not worker.is_alive(), f"{operation.__name__} waited for another model's warm-up"
    finally:
        blocking_gate.release.set()
        loader.join(10)
    assert outcome == {"loaded": True}
    assert execute_counter.requests_seen["slow_warm"] == 500


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

    monkeypatch.setattr(tensor_file, "MAX_BYTES_FILE", 16)
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
