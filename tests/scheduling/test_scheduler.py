"""The response-sink contract as every scheduler keeps it: each submitted
request gets exactly one send, final, carrying its response or its error;
``submit`` never raises for the request's failure; the direct and ensemble
schedulers answer on the caller's thread before ``submit`` returns, the
dynamic batcher from its worker."""

from __future__ import annotations

import threading

import numpy as np
from google.protobuf import text_format

from daemon_process import wait_for
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.direct import DirectScheduler
from edgebox.scheduling.dynamic_batcher import DynamicBatcher
from edgebox.scheduling.ensemble_scheduler import EnsembleScheduler
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes.gated_instance import FakeGatedInstance
from fakes.response_sink import FakeResponseSink

WHERE = "model 'm' version 1"
MODEL = """
name: "m"
max_batch_size: {max_batch}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
{extra}
"""
ENSEMBLE = """
name: "e"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
ensemble_scheduling { step [
  { model_name: "first"  input_map { key: "X" value: "IN" } output_map { key: "Y" value: "mid" } },
  { model_name: "second" input_map { key: "X" value: "mid" } output_map { key: "Y" value: "OUT" } }
] }
"""


def config_for(max_batch: int, extra: str = "") -> ModelConfig:
    return text_format.Parse(MODEL.format(max_batch=max_batch, extra=extra), ModelConfig())


def direct_for(instance) -> DirectScheduler:
    signature = ModelSignature.from_config(config_for(0))
    return DirectScheduler(InstancePool([instance]), signature, WHERE)


def batcher_for(instance, batching: str = "") -> DynamicBatcher:
    config = config_for(8, f"dynamic_batching {{ {batching} }}")
    signature = ModelSignature.from_config(config)
    return DynamicBatcher(InstancePool([instance]), signature, config, WHERE)


def request(value: float, rows: int | None = None) -> InferRequest:
    shape = (rows, 3) if rows else (3,)
    data = np.full(shape, value, dtype=np.float32)
    return InferRequest("m", [Tensor("X", "FP32", data)], id=str(value))


class FakeFailingInstance(FakeGatedInstance):
    """Answers X < 0 with an error in place of its response; raises for X == 13."""

    def execute(self, requests):
        if any(r.input("X").data.flat[0] == 13 for r in requests):
            raise RuntimeError("unlucky")
        results = super().execute(requests)
        return [
            InvalidArgument(f"{WHERE}: negative") if r.input("X").data.flat[0] < 0 else result
            for r, result in zip(requests, results, strict=True)
        ]


# -- direct ------------------------------------------------------------------


def test_direct_sends_one_final_response_on_the_caller_thread_before_returning():
    scheduler = direct_for(FakeGatedInstance())
    sink = FakeResponseSink()
    scheduler.submit(request(2), sink)
    response = sink.only_final
    np.testing.assert_array_equal(response.outputs[0].data, [4, 4, 4])
    assert response.id == "2"
    assert sink.sends[0][2] == threading.current_thread().name


def test_direct_sends_a_failure_as_the_final_instead_of_raising():
    scheduler = direct_for(FakeFailingInstance())
    returned, raised = FakeResponseSink(), FakeResponseSink()
    scheduler.submit(request(-1), returned)
    scheduler.submit(request(13), raised)
    assert (returned.only_final.code, str(returned.only_final)) == (
        ErrorCode.INVALID_ARG,
        f"{WHERE}: negative",
    )
    assert str(raised.only_final) == f"{WHERE}: backend failed: RuntimeError: unlucky"
    stats = scheduler.statistics.snapshot().inference_stats
    assert (stats.fail.count, stats.success.count) == (2, 0)


def test_direct_answers_a_cancelled_request_with_one_final_cancelled():
    instance = FakeGatedInstance()
    scheduler = direct_for(instance)
    gone = request(1)
    gone.is_cancelled = lambda: True
    sink = FakeResponseSink()
    scheduler.submit(gone, sink)
    assert sink.only_final.code is ErrorCode.CANCELLED
    assert instance.batches == []


# -- dynamic batcher -----------------------------------------------------------


def test_batched_requests_each_get_their_own_final_from_the_worker():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for(instance)
    first = FakeResponseSink()
    batcher.submit(request(0, rows=1), first)
    assert instance.entered.wait(5)
    sinks = [FakeResponseSink() for _ in range(3)]
    for value, sink in zip((1, 2, 3), sinks, strict=True):
        batcher.submit(request(value, rows=1), sink)
        assert sink.sends == [], "submit must return before the batch runs"
    wait_for(lambda: batcher.queue_size == 3, what="requests to queue")
    instance.release.set()
    for sink in [first, *sinks]:
        sink.wait()
    assert [len(batch) for batch in instance.batches] == [1, 3]
    for value, sink in zip((1, 2, 3), sinks, strict=True):
        response = sink.only_final
        assert response.id == str(value)
        np.testing.assert_array_equal(response.outputs[0].data, np.full((1, 3), 2.0 * value))
        assert sink.sends[0][2] == "batcher"
    batcher.close()


def test_a_batch_whose_execute_raises_sends_each_request_one_final_error():
    instance = FakeFailingInstance(hold_first=True)
    batcher = batcher_for(instance)
    first = FakeResponseSink()
    batcher.submit(request(0, rows=1), first)
    assert instance.entered.wait(5)
    sinks = [FakeResponseSink() for _ in range(2)]
    batcher.submit(request(13, rows=1), sinks[0])
    batcher.submit(request(1, rows=1), sinks[1])
    wait_for(lambda: batcher.queue_size == 2, what="requests to queue")
    instance.release.set()
    for sink in sinks:
        sink.wait()
        assert str(sink.only_final) == f"{WHERE}: backend failed: RuntimeError: unlucky"
    batcher.close()


def test_a_request_refused_at_the_door_gets_its_final_on_the_caller_thread():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for(instance, "default_queue_policy { max_queue_size: 1 }")
    held, queued, refused = FakeResponseSink(), FakeResponseSink(), FakeResponseSink()
    batcher.submit(request(0, rows=1), held)
    assert instance.entered.wait(5)
    batcher.submit(request(1, rows=1), queued)
    batcher.submit(request(2, rows=1), refused)
    error = refused.only_final
    assert (error.code, str(error)) == (
        ErrorCode.UNAVAILABLE,
        f"{WHERE}: request rejected, the queue is full (1 requests waiting; max_queue_size)",
    )
    assert refused.sends[0][2] == threading.current_thread().name
    instance.release.set()
    queued.wait()
    assert held.only_final.id == "0" and queued.only_final.id == "1"
    batcher.close()


def test_a_cancelled_queued_request_gets_one_final_and_the_rest_of_its_batch_runs():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for(instance)
    held = FakeResponseSink()
    batcher.submit(request(0, rows=1), held)
    assert instance.entered.wait(5)
    gone = threading.Event()
    cancelled = request(1, rows=1)
    cancelled.is_cancelled = gone.is_set
    sinks = [FakeResponseSink(), FakeResponseSink()]
    batcher.submit(cancelled, sinks[0])
    batcher.submit(request(2, rows=1), sinks[1])
    wait_for(lambda: batcher.queue_size == 2, what="requests to queue")
    gone.set()
    instance.release.set()
    for sink in sinks:
        sink.wait()
    assert sinks[0].only_final.code is ErrorCode.CANCELLED
    assert sinks[1].only_final.id == "2"
    batcher.close()


def test_a_sink_that_raises_does_not_stop_the_worker():
    batcher = batcher_for(FakeGatedInstance())
    broken = FakeResponseSink(raises=RuntimeError("the transport broke"))
    batcher.submit(request(1, rows=1), broken)
    broken.wait()
    after = FakeResponseSink()
    batcher.submit(request(2, rows=1), after)
    after.wait()
    assert after.only_final.id == "2"
    assert batcher.failure is None
    batcher.close()


# -- ensemble ------------------------------------------------------------------


def ensemble_for(infer) -> EnsembleScheduler:
    config = text_format.Parse(ENSEMBLE, ModelConfig())
    return EnsembleScheduler(
        config, ModelSignature.from_config(config), infer, "model 'e' version 1"
    )


def double(request: InferRequest) -> InferResponse:
    if request.model_name == "second" and request.input("X").data[0] > 100:
        raise InvalidArgument("model 'second' version 1: too large")
    return InferResponse(
        request.model_name, "1", [Tensor("Y", "FP32", request.input("X").data * 2)]
    )


def ensemble_request(value: float) -> InferRequest:
    return InferRequest("e", [Tensor("IN", "FP32", np.full(3, value, np.float32))], id="e1")


def test_an_ensemble_sends_one_final_after_all_its_steps_on_the_caller_thread():
    steps: list[str] = []

    def infer(request: InferRequest) -> InferResponse:
        steps.append(request.model_name)
        return double(request)

    sink = FakeResponseSink()
    ensemble_for(infer).submit(ensemble_request(1), sink)
    response = sink.only_final
    assert steps == ["first", "second"]
    np.testing.assert_array_equal(response.output("OUT").data, [4, 4, 4])
    assert response.id == "e1"
    assert sink.sends[0][2] == threading.current_thread().name


def test_an_ensemble_step_failure_is_the_one_final_error():
    sink = FakeResponseSink()
    ensemble_for(double).submit(ensemble_request(60), sink)
    error = sink.only_final
    assert isinstance(error, EdgeboxError)
    assert (error.code, str(error)) == (
        ErrorCode.INVALID_ARG,
        "model 'e' version 1, step 'second': model 'second' version 1: too large",
    )
