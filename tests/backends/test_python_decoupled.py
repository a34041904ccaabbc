"""Decoupled python models (``model_transaction_policy { decoupled: true }``):
zero, one or many responses per request through ``get_response_sender()``,
from ``execute`` or a thread it started, run through the in-process stack's
``DataPlane.infer_stream`` as the streaming transports call it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends.base import ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.errors import EdgeboxError, ErrorCode, Unsupported
from edgebox.repository.config import read_model_config
from edgebox.responses import DecoupledUnary
from edgebox.scheduling.decoupled import DecoupledScheduler
from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes.response_sink import FakeStreamSink
from model_fixtures import add_decoupled_repeat, write_model


class Collected(FakeStreamSink):
    def values(self) -> list[int]:
        return [int(r.outputs[0].data[0]) for r, _ in self.sends if isinstance(r, InferResponse)]


def repeat_request(values: list[int], mode: str = "inline", model: str = "repeat") -> InferRequest:
    data = np.array(values, dtype=np.int32)
    return InferRequest(model, [Tensor("IN", "INT32", data)], parameters={"mode": mode})


@pytest.fixture
def repeat(stack, tmp_path):
    add_decoupled_repeat(tmp_path)
    stack.manager.load_model("repeat")
    return stack


def stream(stack, request: InferRequest) -> Collected:
    sink = Collected()
    stack.dataplane.infer_stream(request, sink)
    wait_for(sink.final.is_set, timeout_s=10, what="the final send")
    return sink


@pytest.mark.parametrize("mode", ["inline", "thread"])
def test_many_responses_then_a_final_without_response(repeat, mode) -> None:
    sink = stream(repeat, repeat_request([4, 5, 6], mode))
    assert sink.values() == [4, 5, 6]
    assert [final for _, final in sink.sends] == [False, False, False, True]
    assert sink.sends[-1][0] is None
    first = sink.sends[0][0]
    assert first.model_name == "repeat" and first.model_version == "1"
    assert [t.name for t in first.outputs] == ["OUT", "IDX"]


def test_zero_responses_is_a_lone_final(repeat) -> None:
    sink = stream(repeat, repeat_request([]))
    assert sink.sends == [(None, True)]


def test_final_flag_may_come_with_the_last_response(repeat) -> None:
    sink = stream(repeat, repeat_request([1, 2], "final_with_last"))
    assert sink.values() == [1, 2]
    assert [final for _, final in sink.sends] == [False, True]


def test_statistics_count_each_request_once_at_its_final(repeat) -> None:
    stream(repeat, repeat_request([1, 2, 3]))
    stream(repeat, repeat_request([1], "raise"))
    stats = repeat.dataplane.statistics("repeat")[0].counts.inference_stats
    assert stats.success.count == 1
    assert stats.fail.count == 1


def test_send_after_final_raises_tritons_error_to_the_model(repeat, caplog) -> None:
    caplog.set_level(logging.INFO, "edgebox.model")
    sink = stream(repeat, repeat_request([7], "twice"))
    assert sink.values() == [7]
    assert len(sink.sends) == 2
    assert "second final: Unable to send response. Response sender has been closed." in (
        caplog.text
    )


def test_error_response_is_sent_and_the_stream_goes_on(repeat) -> None:
    sink = stream(repeat, repeat_request([3], "error"))
    error, final = sink.sends[0]
    assert isinstance(error, EdgeboxError) and not final
    assert str(error) == "model 'repeat' version 1: first one failed"
    assert sink.values() == [3]


def test_execute_raising_fails_the_request(repeat) -> None:
    sink = stream(repeat, repeat_request([3], "raise"))
    ((error, final),) = sink.sends
    assert final
    assert str(error).startswith(
        "model 'repeat' version 1: execute() raised ValueError: no answer today (model.py line"
    )


def test_execute_returning_responses_fails_the_request(repeat) -> None:
    sink = stream(repeat, repeat_request([3], "return"))
    ((error, final),) = sink.sends
    assert final
    assert str(error) == (
        "model 'repeat' version 1: a decoupled model's execute() must return None, it "
        "returned list; send responses through request.get_response_sender()"
    )


def test_unary_infer_is_refused(repeat) -> None:
    with pytest.raises(DecoupledUnary) as caught:
        repeat.dataplane.infer(repeat_request([1]))
    assert caught.value.code is ErrorCode.UNSUPPORTED
    assert str(caught.value) == (
        "model 'repeat' version 1: a decoupled model answers through a stream (gRPC "
        "ModelStreamInfer, HTTP generate_stream), not unary infer"
    )


def test_held_request_fails_at_unload_after_the_grace(repeat, monkeypatch) -> None:
    monkeypatch.setattr(DecoupledScheduler, "unload_grace_s", 0.2)
    sink = Collected()
    repeat.dataplane.infer_stream(repeat_request([9], "hold"), sink)
    assert sink.values() == [9] and not sink.final.is_set()
    repeat.manager.unload_model("repeat")
    wait_for(sink.final.is_set, timeout_s=10, what="the held request's final")
    error, final = sink.sends[-1]
    assert final and error.code is ErrorCode.UNAVAILABLE
    assert str(error) == (
        "model 'repeat' version 1: the version was retired (unloaded) before the model "
        "sent the request's final response"
    )
    assert repeat.manager.wait_retired(10)


def test_cancelled_request_reaches_the_model_through_reshape(stack, tmp_path) -> None:
    model_dir = add_decoupled_repeat(tmp_path, "reshaped")
    config = (model_dir / "config.pbtxt").read_text()
    config = config.replace("dims: [ -1 ] }", "dims: [ -1 ] reshape: { shape: [ -1 ] } }")
    (model_dir / "config.pbtxt").write_text(config)
    stack.manager.load_model("reshaped")
    request = repeat_request([5], "report_cancel", model="reshaped")
    calls = []
    # The scheduler asks first (not cancelled), the model's sender after.
    request.is_cancelled = lambda: calls.append(1) or len(calls) > 1
    sink = stream(stack, request)
    assert sink.values() == [1], "the model's request lost is_cancelled when reshaped"


def test_response_sender_checks_its_arguments() -> None:
    sent = []
    sender = pb_utils.InferenceResponseSender(lambda r, f: sent.append((r, f)), None)
    with pytest.raises(pb_utils.TritonModelException) as caught:
        sender.send()
    assert caught.value.message() == (
        "Inference Response object must be provided when the response flags is not equal "
        "to TRITONSERVER_RESPONSE_COMPLETE_FINAL."
    )
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="sender has been closed"):
        sender.send(pb_utils.InferenceResponse([]))
    assert sent == [(None, True)] and not sender.is_cancelled()


def test_decoupled_model_cannot_run_isolated(tmp_path) -> None:
    model_dir = add_decoupled_repeat(tmp_path)
    config_path = model_dir / "config.pbtxt"
    config_path.write_text(
        config_path.read_text()
        + 'parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }\n'
    )
    context = ModelContext("repeat", 1, read_model_config(model_dir), model_dir, model_dir / "1")
    backend = Backend()
    with pytest.raises(Unsupported) as caught:
        backend.complete_config(context)
    backend.unload(context)
    assert str(caught.value) == (
        "model 'repeat' version 1: a decoupled model cannot run isolated (EDGEBOX_ISOLATION "
        "'process'): its response sender exists in the daemon's process only; run it "
        "'in_process'"
    )


def test_model_without_decoupled_policy_has_no_sender(stack, tmp_path) -> None:
    write_model(
        tmp_path,
        "plain",
        """
    name: "plain"
    backend: "python"
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
    """,
        {
            "1/model.py": """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                request.get_response_sender()
    """
        },
    )
    stack.manager.load_model("plain")
    with pytest.raises(EdgeboxError, match="get_response_sender\\(\\) is for decoupled models"):
        stack.dataplane.infer(repeat_request([1], model="plain"))


BLS_CALLER_CONFIG = """
name: "caller"
backend: "python"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

# In the shape of python_backend's bls_decoupled: an ordinary model that calls a
# decoupled one with exec(decoupled=True) and folds its responses into one.
BLS_CALLER_MODEL = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = json.loads(request.parameters()).get("mode", "inline")
            bls = pb_utils.InferenceRequest(
                model_name=json.loads(request.parameters()).get("target", "repeat"),
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
                parameters={"mode": mode},
            )
            total, empty_finals = 0, 0
            for response in bls.exec(decoupled=True):
                if response.has_error():
                    responses.append(pb_utils.InferenceResponse(error=response.error()))
                    break
                if not response.output_tensors():
                    empty_finals += 1
                    continue
                total += int(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0])
            else:
                value = np.array([total * 10 + empty_finals], np.int32)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", value)]))
        return responses
"""


@pytest.fixture
def caller(repeat, tmp_path):
    write_model(tmp_path, "caller", BLS_CALLER_CONFIG, {"1/model.py": BLS_CALLER_MODEL})
    repeat.manager.load_model("caller")
    return repeat


@pytest.mark.parametrize(
    ("mode", "expected"), [("inline", 61), ("thread", 61), ("final_with_last", 60)]
)
def test_bls_exec_decoupled_iterates_every_response(caller, mode, expected) -> None:
    request = repeat_request([1, 2, 3], mode, model="caller")
    response = caller.dataplane.infer(request)
    assert int(response.outputs[0].data[0]) == expected


def test_bls_exec_decoupled_reports_the_called_models_error(caller) -> None:
    with pytest.raises(EdgeboxError) as caught:
        caller.dataplane.infer(repeat_request([1], "raise", model="caller"))
    assert "execute() raised ValueError: no answer today" in str(caught.value)


# In the shape of python_backend's bls_decoupled async_model: an async execute
# that gathers two async_exec(decoupled=True) calls.
ASYNC_CALLER_MODEL = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        (request,) = requests
        calls = [
            pb_utils.InferenceRequest(
                model_name="repeat",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            ).async_exec(decoupled=True)
            for _ in range(2)
        ]
        total = 0
        for responses in await asyncio.gather(*calls):
            for response in responses:
                if response.output_tensors():
                    total += int(response.output_tensors()[0].as_numpy()[0])
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([total], np.int32))])]
"""


def test_async_execute_gathers_decoupled_bls_calls(repeat, tmp_path) -> None:
    config = BLS_CALLER_CONFIG.replace('"caller"', '"async_caller"')
    write_model(tmp_path, "async_caller", config, {"1/model.py": ASYNC_CALLER_MODEL})
    repeat.manager.load_model("async_caller")
    response = repeat.dataplane.infer(repeat_request([1, 2, 3], model="async_caller"))
    assert int(response.outputs[0].data[0]) == 12
