"""``DataPlane.infer_stream``: the verb gRPC ModelStreamInfer and HTTP
generate_stream will call. Every outcome reaches the caller's sink, the last
send final; the model version stays held until that final; a producer that
sends after the final is stopped there."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from google.protobuf import text_format

from edgebox.dataplane import DataPlane
from edgebox.errors import ErrorCode
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.repository.config import ModelConfig
from edgebox.responses import ResponseContractError
from edgebox.scheduling.scheduler import Scheduler
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes.response_sink import FakeResponseSink
from model_fixtures import add_add_sub

CONFIG = """
name: "m"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


class FakeScriptedScheduler(Scheduler):
    """Sends ``script`` (a list of (response, final)) to each request's sink,
    from its own thread once ``go`` is set; raises ``raises`` from submit."""

    failure = None

    def __init__(self, script, raises: Exception | None = None) -> None:
        self.statistics = ModelStatistics()
        self._where = "model 'm' version 1"
        self.script = script
        self.raises = raises
        self.go = threading.Event()
        self.misuse: list[Exception] = []
        self.sent = threading.Event()

    def submit(self, request, sink) -> None:
        if self.raises is not None:
            raise self.raises
        threading.Thread(target=self._send, args=(sink,), name="producer").start()

    def _send(self, sink) -> None:
        self.go.wait(10)
        for response, final in self.script:
            try:
                sink.send(response, final)
            except ResponseContractError as exc:
                self.misuse.append(exc)
        self.sent.set()

    def close(self) -> None:
        pass


def dataplane_with(scheduler: Scheduler) -> tuple[DataPlane, ServedModel]:
    config = text_format.Parse(CONFIG, ModelConfig())
    served = ServedModel("m", 1, config, ModelSignature.from_config(config), scheduler)
    registry = ModelRegistry()
    registry.publish(served)
    return DataPlane(registry), served


def request(name: str = "m", input_name: str = "X") -> InferRequest:
    return InferRequest(name, [Tensor(input_name, "FP32", np.ones(3, np.float32))], id="r1")


def answer(tag: str) -> InferResponse:
    return InferResponse("", "", [Tensor("Y", "FP32", np.zeros(3, np.float32))], id=tag)


def test_every_response_reaches_the_sink_and_the_version_is_held_until_the_final():
    scheduler = FakeScriptedScheduler([(answer("a"), False), (answer("b"), False), (None, True)])
    dataplane, served = dataplane_with(scheduler)
    sink = FakeResponseSink()
    dataplane.infer_stream(request(), sink)
    assert served.inflight == 1, "the version must stay held while responses may come"
    scheduler.go.set()
    sink.wait()
    assert [(r and r.id, final, thread) for r, final, thread in sink.sends] == [
        ("a", False, "producer"),
        ("b", False, "producer"),
        (None, True, "producer"),
    ]
    assert [(r.model_name, r.model_version) for r, _, _ in sink.sends[:2]] == [("m", "1")] * 2
    assert served.inflight == 0


def test_a_send_after_the_final_raises_at_the_producer_and_releases_the_version_once():
    scheduler = FakeScriptedScheduler([(answer("a"), True), (answer("late"), True)])
    dataplane, served = dataplane_with(scheduler)
    sink = FakeResponseSink()
    dataplane.infer_stream(request(), sink)
    scheduler.go.set()
    assert scheduler.sent.wait(10)
    assert [str(e) for e in scheduler.misuse] == [
        "model 'm' version 1: a response was sent after the final one"
    ]
    assert sink.only_final.id == "a"
    assert served.inflight == 0


def test_an_unknown_model_is_one_final_not_found_never_raised():
    dataplane, _ = dataplane_with(FakeScriptedScheduler([]))
    sink = FakeResponseSink()
    dataplane.infer_stream(request("nope"), sink)
    assert (sink.only_final.code, str(sink.only_final)) == (
        ErrorCode.NOT_FOUND,
        "Request for unknown model: 'nope' is not found",
    )


def test_an_invalid_request_is_one_final_error_and_releases_the_version():
    dataplane, served = dataplane_with(FakeScriptedScheduler([]))
    sink = FakeResponseSink()
    dataplane.infer_stream(request(input_name="Z"), sink)
    assert sink.only_final.code is ErrorCode.INVALID_ARG
    assert served.inflight == 0


def test_a_scheduler_that_raises_still_ends_the_stream_with_one_final_error():
    dataplane, served = dataplane_with(FakeScriptedScheduler([], raises=RuntimeError("boom")))
    sink = FakeResponseSink()
    dataplane.infer_stream(request(), sink)
    assert (sink.only_final.code, str(sink.only_final)) == (
        ErrorCode.INTERNAL,
        "model 'm' version 1: request failed: RuntimeError: boom",
    )
    assert served.inflight == 0


@pytest.mark.parametrize("batching", ["", "dynamic_batching { }"])
def test_an_ordinary_model_sends_exactly_one_final_response(stack, batching):
    add_add_sub(stack.manager.repository, config_extra=batching)
    stack.manager.load_model("add_sub")
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    inputs = [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)]
    sink = FakeResponseSink()
    stack.dataplane.infer_stream(InferRequest("add_sub", inputs, id="s1"), sink)
    sink.wait()
    response = sink.only_final
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "s1")
    np.testing.assert_array_equal(response.output("OUTPUT0").data, data * 2)
    np.testing.assert_array_equal(response.output("OUTPUT1").data, data * 0)
    unary = stack.dataplane.infer(InferRequest("add_sub", inputs, id="u1"))
    np.testing.assert_array_equal(unary.output("OUTPUT0").data, data * 2)
