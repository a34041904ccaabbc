from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from google.protobuf import text_format

from daemon_process import wait_for
from edgebox.errors import ErrorCode, Unavailable
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.dynamic_batcher import DynamicBatcher
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, Tensor
from fakes.caller import Caller
from fakes.gated_instance import FakeGatedInstance

CONFIG = """
name: "m"
max_batch_size: {max_batch}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
dynamic_batching {{ {batching} }}
"""


def batcher_for(instances, max_batch: int = 8, batching: str = "") -> DynamicBatcher:
    config = text_format.Parse(CONFIG.format(max_batch=max_batch, batching=batching), ModelConfig())
    return DynamicBatcher(InstancePool(instances), ModelSignature.from_config(config), config, "model 'm' version 1")


def request(value: float, width: int = 3, rows: int = 1, **parameters) -> InferRequest:
    data = np.full((rows, width), value, dtype=np.float32)
    return InferRequest("m", [Tensor("X", "FP32", data)], id=str(value), parameters=parameters)


def hold_first_then_queue(batcher, instance, requests) -> list[Caller]:
    """One request holds the instance; the rest queue up behind it."""
    first = Caller(batcher, request(0.0))
    assert instance.entered.wait(5)
    callers = [Caller(batcher, r) for r in requests]
    wait_for(lambda: batcher.queue_size == len(requests), what="requests to queue")
    instance.release.set()
    for caller in [first, *callers]:
        caller.join(10)
    return callers


def test_requests_waiting_together_leave_as_one_batch():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance])
    callers = hold_first_then_queue(batcher, instance, [request(v) for v in (1, 2, 3, 4, 5)])
    assert [len(b) for b in instance.batches] == [1, 5]
    for caller, value in zip(callers, (1, 2, 3, 4, 5), strict=True):
        assert caller.error is None
        assert caller.response.id == str(value)
        np.testing.assert_array_equal(caller.response.outputs[0].data, np.full((1, 3), 2.0 * value))
    stats = batcher.statistics.snapshot()
    assert stats.execution_count == 2
    assert stats.inference_count == 6
    assert [b.batch_size for b in stats.batch_stats] == [1, 5]
    batcher.close()


def test_batches_never_exceed_max_batch_size_in_items():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], max_batch=4)
    hold_first_then_queue(batcher, instance, [request(1, rows=2), request(2), request(3, rows=2), request(4)])
    sizes = [sum(r.inputs[0].data.shape[0] for r in b) for b in instance.batches]
    assert sizes == [1, 3, 3]
    batcher.close()


def test_requests_of_different_shapes_are_not_merged():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance])
    hold_first_then_queue(batcher, instance, [request(1, width=3), request(2, width=5), request(3, width=3)])
    widths = [[r.inputs[0].data.shape[1] for r in b] for b in instance.batches]
    assert widths == [[3], [3, 3], [5]]
    batcher.close()


def test_preferred_batch_size_dispatches_without_waiting_for_the_delay():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], batching="preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 60000000")
    first, second = Caller(batcher, request(1)), None
    assert not first.finished.wait(0.05), "a batch of 1 left before the 60 s delay or a second request"
    second = Caller(batcher, request(2))
    assert instance.entered.wait(5)
    instance.release.set()
    assert first.finished.wait(5) and second.finished.wait(5)
    assert [len(b) for b in instance.batches] == [2]
    batcher.close()


def test_a_lone_request_waits_at_most_the_queue_delay():
    instance = FakeGatedInstance()
    batcher = batcher_for([instance], batching="max_queue_delay_microseconds: 50000")
    started = time.monotonic()
    batcher.infer(request(1))
    waited = time.monotonic() - started
    assert 0.05 <= waited < 5
    batcher.close()


def test_full_queue_rejects_with_a_clear_error():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], batching="default_queue_policy { max_queue_size: 2 }")
    first = Caller(batcher, request(0))
    assert instance.entered.wait(5)
    queued = [Caller(batcher, request(1)), Caller(batcher, request(2))]
    wait_for(lambda: batcher.queue_size == 2, what="two queued requests")
    with pytest.raises(Unavailable) as error:
        batcher.infer(request(3))
    assert str(error.value) == (
        "model 'm' version 1: request rejected, the queue is full (2 requests waiting; max_queue_size)"
    )
    instance.release.set()
    for caller in [first, *queued]:
        caller.join(10)
        assert caller.error is None
    assert batcher.statistics.snapshot().inference_stats.fail.count == 1
    batcher.close()


def test_requests_late_in_the_queue_are_rejected():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], batching="default_queue_policy { timeout_action: REJECT allow_timeout_override: true }")
    first = Caller(batcher, request(0))
    assert instance.entered.wait(5)
    late = Caller(batcher, request(1, timeout=1))
    wait_for(lambda: batcher.queue_size == 1, what="the late request to queue")
    instance.release.set()
    first.join(10)
    late.join(10)
    assert isinstance(late.error, Unavailable)
    assert "request timed out after waiting" in str(late.error)
    batcher.close()


def test_preserve_ordering_holds_a_later_batch_until_the_earlier_one_finishes():
    a, b = FakeGatedInstance("a", hold_first=True), FakeGatedInstance("b", hold_first=True)
    batcher = batcher_for([a, b], batching="preserve_ordering: true")
    first = Caller(batcher, request(1))
    wait_for(lambda: a.entered.is_set() or b.entered.is_set(), what="the first batch to start")
    held, free = (a, b) if a.entered.is_set() else (b, a)
    free.release.set()
    second = Caller(batcher, request(2))
    assert free.executed.wait(5)
    assert not second.finished.wait(0.2), "a later batch was answered before an earlier one"
    held.release.set()
    assert first.finished.wait(5) and second.finished.wait(5)
    assert first.error is None and second.error is None
    batcher.close()


def test_without_preserve_ordering_a_later_batch_may_finish_first():
    a, b = FakeGatedInstance("a", hold_first=True), FakeGatedInstance("b", hold_first=True)
    batcher = batcher_for([a, b])
    first = Caller(batcher, request(1))
    wait_for(lambda: a.entered.is_set() or b.entered.is_set(), what="the first batch to start")
    held, free = (a, b) if a.entered.is_set() else (b, a)
    free.release.set()
    second = Caller(batcher, request(2))
    assert second.finished.wait(5), "an idle instance did not serve the second request"
    held.release.set()
    assert first.finished.wait(5)
    batcher.close()


def test_close_releases_every_instance():
    instances = [FakeGatedInstance("a"), FakeGatedInstance("b")]
    batcher = batcher_for(instances)
    batcher.infer(request(1))
    batcher.close()
    assert all(i.closed for i in instances)
    with pytest.raises(Unavailable, match="being unloaded"):
        batcher.infer(request(2))


class FakeBrokenInstance(FakeGatedInstance):
    """Returns something that is not a response at all."""

    def execute(self, requests):
        self.batches.append(list(requests))
        return [object() for _ in requests]


def test_a_batch_that_breaks_answers_its_callers_and_the_worker_lives_on():
    instance = FakeBrokenInstance()
    batcher = batcher_for([instance])
    for value in (1, 2):
        caller = Caller(batcher, request(value))
        assert caller.finished.wait(5), "a caller was left waiting"
        assert "batch failed" in str(caller.error)
    assert len(instance.batches) == 2
    batcher.close()


class FakeInterruptedInstance(FakeGatedInstance):
    """Raises ``raised`` from execute for a batch holding X < 0."""

    def __init__(self, raised: type[BaseException]) -> None:
        super().__init__()
        self.raised = raised

    def execute(self, requests):
        if any(r.input("X").data[0, 0] < 0 for r in requests):
            self.batches.append(list(requests))
            raise self.raised("raised by the backend")
        return super().execute(requests)


@pytest.mark.parametrize(
    "raised", [KeyboardInterrupt, SystemExit, asyncio.CancelledError, GeneratorExit]
)
def test_a_base_exception_from_execute_answers_its_callers_and_the_worker_lives_on(raised):
    batcher = batcher_for([FakeInterruptedInstance(raised)])
    failed = Caller(batcher, request(-1))
    assert failed.finished.wait(5), "the caller was left waiting"
    assert failed.error.code is ErrorCode.INTERNAL
    assert str(failed.error) == (
        f"model 'm' version 1: backend failed: {raised.__name__}: raised by the backend"
    )
    served = Caller(batcher, request(2))
    assert served.finished.wait(5), "the next caller was left waiting"
    np.testing.assert_array_equal(served.response.outputs[0].data, np.full((1, 3), 4.0))
    assert batcher.failure is None
    batcher.close()


def test_a_request_cancelled_while_queued_is_answered_and_never_run():
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance])
    first = Caller(batcher, request(0.0))
    assert instance.entered.wait(5)
    gone = threading.Event()
    cancelled = request(1)
    cancelled.is_cancelled = gone.is_set
    callers = [Caller(batcher, cancelled), Caller(batcher, request(2))]
    wait_for(lambda: batcher.queue_size == 2, what="requests to queue")
    gone.set()
    instance.release.set()
    for caller in [first, *callers]:
        assert caller.finished.wait(5)
    assert callers[0].error.code is ErrorCode.CANCELLED
    assert str(callers[0].error) == (
        "model 'm' version 1: request cancelled: its client gave up while it waited; not run"
    )
    np.testing.assert_array_equal(callers[1].response.outputs[0].data, np.full((1, 3), 4.0))
    assert [[r.id for r in batch] for batch in instance.batches] == [["0.0"], ["2"]]
    stats = batcher.statistics.snapshot().inference_stats
    assert (stats.fail.count, stats.success.count) == (1, 2)
    batcher.close()


def test_a_worker_that_cannot_go_on_fails_the_queue_and_reports_why(monkeypatch):
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance])
    first = Caller(batcher, request(0.0))
    assert instance.entered.wait(5)
    queued = Caller(batcher, request(1))
    wait_for(lambda: batcher.queue_size == 1, what="a request to queue")

    def out_of_memory():
        raise MemoryError("simulated")

    # Simulated: forming the next batch fails, which the worker cannot survive.
    monkeypatch.setattr(batcher, "_next_batch", out_of_memory)
    instance.release.set()
    assert first.finished.wait(5) and queued.finished.wait(5)
    reason = "model 'm' version 1: a batcher worker stopped: MemoryError: simulated"
    assert first.error is None
    assert (queued.error.code, str(queued.error)) == (ErrorCode.UNAVAILABLE, reason)
    assert batcher.failure == reason
    with pytest.raises(Unavailable, match="a batcher worker stopped"):
        batcher.infer(request(2))
    batcher.close()
