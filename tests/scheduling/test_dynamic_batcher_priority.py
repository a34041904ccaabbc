"""The dynamic batcher's priority levels: the most urgent requests leave
first, ``priority`` 0 or out of range means the default level as in Triton,
and each level keeps its own queue policy. One instance is held busy while
requests queue behind it one at a time, so their order is known."""

from __future__ import annotations

import pytest

from daemon_process import wait_for
from edgebox.errors import InvalidArgument, Unavailable
from fakes.caller import Caller
from fakes.gated_instance import FakeGatedInstance
from scheduling.test_dynamic_batcher import batcher_for, request

LEVELS = "priority_levels: 2 default_priority_level: {default} {extra}"


def queued_behind_a_busy_instance(batcher, instance, requests) -> list[Caller]:
    first = Caller(batcher, request(0.0))
    assert instance.entered.wait(5)
    callers = []
    for queued, req in enumerate(requests, start=1):
        callers.append(Caller(batcher, req))
        wait_for(lambda q=queued: batcher.queue_size == q, what="the request to queue")
    return [first, *callers]


def run_all(instance, callers: list[Caller]) -> None:
    instance.release.set()
    for caller in callers:
        assert caller.finished.wait(10)


def batch_ids(instance) -> list[list[str]]:
    return [[r.id for r in batch] for batch in instance.batches]


def test_the_most_urgent_requests_form_the_next_batch() -> None:
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], max_batch=2, batching=LEVELS.format(default=2, extra=""))
    priorities = {1.0: 2, 2.0: 2, 3.0: 1, 4.0: 1}
    callers = queued_behind_a_busy_instance(
        batcher, instance, [request(v, priority=p) for v, p in priorities.items()]
    )
    run_all(instance, callers)
    assert batch_ids(instance) == [["0.0"], ["3.0", "4.0"], ["1.0", "2.0"]]
    assert all(caller.error is None for caller in callers)
    batcher.close()


def test_priority_zero_or_beyond_the_levels_means_the_default_level() -> None:
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], max_batch=1, batching=LEVELS.format(default=1, extra=""))
    callers = queued_behind_a_busy_instance(
        batcher, instance, [request(1, priority=2), request(2, priority=0), request(3, priority=9)]
    )
    run_all(instance, callers)
    assert batch_ids(instance) == [["0.0"], ["2"], ["3"], ["1"]]
    batcher.close()


def test_without_priority_levels_the_priority_parameter_changes_nothing() -> None:
    instance = FakeGatedInstance(hold_first=True)
    batcher = batcher_for([instance], max_batch=1)
    callers = queued_behind_a_busy_instance(
        batcher, instance, [request(1, priority=5), request(2, priority=1)]
    )
    run_all(instance, callers)
    assert batch_ids(instance) == [["0.0"], ["1"], ["2"]]
    batcher.close()


def test_each_level_has_its_own_queue_size() -> None:
    instance = FakeGatedInstance(hold_first=True)
    policy = "priority_queue_policy { key: 2 value: { max_queue_size: 1 } }"
    batcher = batcher_for([instance], batching=LEVELS.format(default=1, extra=policy))
    callers = queued_behind_a_busy_instance(
        batcher, instance, [request(1, priority=2), request(2, priority=1)]
    )
    with pytest.raises(Unavailable, match=r"queue is full \(1 requests waiting"):
        batcher.infer(request(3, priority=2))
    run_all(instance, callers)
    assert all(caller.error is None for caller in callers)
    batcher.close()


def test_each_level_has_its_own_timeout() -> None:
    instance = FakeGatedInstance(hold_first=True)
    policy = (
        "priority_queue_policy { key: 2 value: "
        "{ default_timeout_microseconds: 1 timeout_action: REJECT } }"
    )
    batcher = batcher_for([instance], batching=LEVELS.format(default=1, extra=policy))
    first, urgent, patient = queued_behind_a_busy_instance(
        batcher, instance, [request(1, priority=1), request(2, priority=2)]
    )
    run_all(instance, [first, urgent, patient])
    assert urgent.error is None
    assert isinstance(patient.error, Unavailable)
    assert "timed out" in str(patient.error)
    batcher.close()


@pytest.mark.parametrize("priority", ["high", -1, 1.5, True])
def test_a_priority_that_is_no_unsigned_integer_is_refused(priority) -> None:
    batcher = batcher_for([FakeGatedInstance()], batching=LEVELS.format(default=1, extra=""))
    with pytest.raises(InvalidArgument, match="parameter 'priority' must be an unsigned integer"):
        batcher.infer(request(1, priority=priority))
    batcher.close()
