"""The rate limiter's rules, with threads that wait for it and events instead
of timing: resources are never over-committed, the queue is ordered by
executions x priority, the head is never overtaken, and limits follow the
registered instances and the command line as Triton's do."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from daemon_process import wait_for
from edgebox.errors import Cancelled, InvalidArgument
from edgebox.scheduling.rate_limiter import (
    GLOBAL,
    Claim,
    RateLimiter,
    ResourceGiven,
    claim_for,
)


class Runner:
    """A thread that takes ``claim``'s resources, records its turn, and holds
    them until released; so a test sees exactly who holds what."""

    def __init__(self, limiter: RateLimiter, claim: Claim, turns: list[str]) -> None:
        self.claim = claim
        self.holding = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self._limiter = limiter
        self._turns = turns
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._limiter.running(self.claim):
                self._turns.append(self.claim.where)
                self.holding.set()
                assert self.release.wait(10)
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        self.release.set()
        self._thread.join(10)
        assert not self._thread.is_alive()


def waiting(limiter: RateLimiter, count: int) -> Callable[[], bool]:
    return lambda: len(limiter.waiting()) == count


def test_limits_default_to_the_most_any_instance_needs_per_device() -> None:
    limiter = RateLimiter()
    limiter.register(
        [
            claim_for("a", 0, [("R1", 4, False), ("R2", 4, False)], 0),
            claim_for("b", 0, [("R2", 5, False), ("R3", 10, True)], 0),
            claim_for("c", 1, [("R1", 1, False)], 0),
        ]
    )
    assert limiter.limits() == {(0, "R1"): 4, (0, "R2"): 5, (GLOBAL, "R3"): 10, (1, "R1"): 1}


def test_given_resources_apply_per_device_unless_a_device_is_named() -> None:
    given = [ResourceGiven.parse(t) for t in ("R1:10", "R2:5:0", "R2:8:1", "R3:2")]
    limiter = RateLimiter(given)
    limiter.register(
        [
            claim_for("a", 0, [("R1", 1, False), ("R2", 1, False)], 0),
            claim_for("b", 1, [("R1", 1, False), ("R2", 1, False), ("R3", 1, True)], 0),
        ]
    )
    assert limiter.limits() == {
        (0, "R1"): 10,
        (0, "R2"): 5,
        (1, "R1"): 10,
        (1, "R2"): 8,
        (GLOBAL, "R3"): 2,
    }


def test_a_given_count_below_an_instances_need_refuses_its_registration() -> None:
    limiter = RateLimiter([ResourceGiven.parse("R1:2")])
    limiter.register([claim_for("small", 0, [("R1", 1, False)], 0)])
    with pytest.raises(InvalidArgument) as refused:
        limiter.register([claim_for("big", 0, [("R1", 4, False)], 0)])
    assert str(refused.value) == (
        'Resource count for "R1" is limited to 2 which will prevent scheduling of one or '
        "more model instances, the minimum required count is 4"
    )
    assert limiter.limits() == {(0, "R1"): 2}


def test_a_resource_not_given_has_no_copies_once_any_is_given() -> None:
    limiter = RateLimiter([ResourceGiven.parse("R1:2")])
    with pytest.raises(InvalidArgument, match='"R9" is limited to 0'):
        limiter.register([claim_for("m", 0, [("R9", 1, False)], 0)])


def test_one_name_global_and_per_device_is_refused() -> None:
    limiter = RateLimiter()
    limiter.register([claim_for("a", 0, [("R1", 1, True)], 0)])
    with pytest.raises(InvalidArgument, match="both global and device-specific"):
        limiter.register([claim_for("b", 0, [("R1", 1, False)], 0)])


def test_unregistering_lowers_the_default_limits() -> None:
    limiter = RateLimiter()
    small = claim_for("small", 0, [("R1", 1, False)], 0)
    big = claim_for("big", 0, [("R1", 3, False)], 0)
    limiter.register([small])
    limiter.register([big])
    assert limiter.limits() == {(0, "R1"): 3}
    limiter.unregister([big])
    assert limiter.limits() == {(0, "R1"): 1}


@pytest.mark.parametrize("text", ["R1", "R1:x", ":3", "R1:2:gpu", "R1:1:2:3"])
def test_malformed_resource_flags_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=text):
        ResourceGiven.parse(text)


def test_instances_needing_the_last_copy_run_one_at_a_time() -> None:
    limiter = RateLimiter()
    first = claim_for("first", 0, [("R1", 1, False)], 0)
    second = claim_for("second", 0, [("R1", 1, False)], 0)
    limiter.register([first, second])
    turns: list[str] = []
    holder = Runner(limiter, first, turns)
    assert holder.holding.wait(10)
    other = Runner(limiter, second, turns)
    wait_for(waiting(limiter, 1), what="the second instance to queue")
    assert not other.holding.is_set()
    holder.finish()
    assert other.holding.wait(10)
    other.finish()
    assert turns == ["first", "second"]


def test_instances_without_a_shared_resource_run_together() -> None:
    limiter = RateLimiter()
    a = claim_for("a", 0, [("R1", 1, False)], 0)
    b = claim_for("b", 0, [("R2", 1, False)], 0)
    limiter.register([a, b])
    turns: list[str] = []
    runners = [Runner(limiter, a, turns), Runner(limiter, b, turns)]
    for runner in runners:
        assert runner.holding.wait(10)
    for runner in runners:
        runner.finish()


def test_fewest_executions_times_priority_goes_first() -> None:
    limiter = RateLimiter()
    holder = claim_for("holder", 0, [("R1", 1, False)], 0)
    busy = claim_for("busy, priority 1", 0, [("R1", 1, False)], 1)
    rare = claim_for("low priority", 0, [("R1", 1, False)], 3)
    busy.executions, rare.executions = 2, 1
    limiter.register([holder, busy, rare])
    turns: list[str] = []
    first = Runner(limiter, holder, turns)
    assert first.holding.wait(10)
    runners = [Runner(limiter, busy, turns)]
    wait_for(waiting(limiter, 1), what="one waiter")
    runners.append(Runner(limiter, rare, turns))
    wait_for(waiting(limiter, 2), what="two waiters")
    assert limiter.waiting() == ["busy, priority 1", "low priority"]
    first.finish()
    for runner in runners:
        assert runner.holding.wait(10)
        runner.finish()
    assert turns == ["holder", "busy, priority 1", "low priority"]


def test_the_head_of_the_queue_is_not_overtaken_by_a_smaller_claim() -> None:
    limiter = RateLimiter()
    holder = claim_for("holder", 0, [("R1", 1, False)], 0)
    big = claim_for("big", 0, [("R1", 2, False)], 0)
    small = claim_for("small", 0, [("R1", 1, False)], 0)
    small.executions = 1
    limiter.register([holder, big, small])
    turns: list[str] = []
    first = Runner(limiter, holder, turns)
    assert first.holding.wait(10)
    big_runner = Runner(limiter, big, turns)
    wait_for(waiting(limiter, 1), what="the big claim to queue")
    small_runner = Runner(limiter, small, turns)
    wait_for(waiting(limiter, 2), what="the small claim to queue")
    assert not small_runner.holding.is_set()
    first.finish()
    assert big_runner.holding.wait(10)
    assert not small_runner.holding.is_set()
    big_runner.finish()
    assert small_runner.holding.wait(10)
    small_runner.finish()
    assert turns == ["holder", "big", "small"]


def test_executions_are_counted_per_instance() -> None:
    limiter = RateLimiter()
    claim = claim_for("m", 0, [("R1", 1, False)], 2)
    limiter.register([claim])
    for _ in range(3):
        with limiter.running(claim):
            pass
    assert claim.executions == 3


def test_a_waiter_whose_version_closes_gives_up_and_holds_nothing() -> None:
    limiter = RateLimiter()
    holder = claim_for("holder", 0, [("R1", 1, False)], 0)
    closing = claim_for("closing", 0, [("R1", 1, False)], 0)
    limiter.register([holder, closing])
    turns: list[str] = []
    first = Runner(limiter, holder, turns)
    assert first.holding.wait(10)
    doomed = Runner(limiter, closing, turns)
    wait_for(waiting(limiter, 1), what="the waiter")
    limiter.unregister([closing])
    doomed.finish()
    assert isinstance(doomed.error, Cancelled)
    assert limiter.waiting() == []
    first.finish()
    with limiter.running(holder):
        pass
