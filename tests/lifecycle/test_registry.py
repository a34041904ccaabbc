from __future__ import annotations

import threading

import pytest

from edgebox.errors import InvalidArgument, NotFound, Unavailable
from edgebox.events import EventBus, ModelStateChanged
from edgebox.lifecycle.registry import ModelRegistry, ServedModel
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.signature import ModelSignature


class FakeScheduler:
    def __init__(self) -> None:
        self.closed = False
        self.failure: str | None = None

    def close(self) -> None:
        self.closed = True


def served(name: str, version: int) -> ServedModel:
    signature = ModelSignature(name, 0, {}, {})
    return ServedModel(name, version, config=None, signature=signature, scheduler=FakeScheduler())


def test_default_version_is_highest_ready():
    registry = ModelRegistry()
    registry.publish(served("m", 1))
    registry.publish(served("m", 3))
    registry.publish(served("m", 2))
    model = registry.acquire("m")
    assert model.version == 3
    model.exit()
    assert registry.acquire("m", "2").version == 2


def test_unknown_model_and_version_are_not_found():
    registry = ModelRegistry()
    with pytest.raises(NotFound, match=r"^Request for unknown model: 'ghost' is not found$"):
        registry.acquire("ghost")
    registry.publish(served("m", 1))
    with pytest.raises(NotFound, match=r"^Request for unknown model: 'm' version 7 is not found$"):
        registry.acquire("m", "7")
    with pytest.raises(InvalidArgument, match="version 'x' is not a version number"):
        registry.acquire("m", "x")


def test_not_ready_version_reports_its_reason():
    registry = ModelRegistry()
    registry.set_status("m", 2, ModelState.UNAVAILABLE, "model.onnx is truncated")
    with pytest.raises(
        Unavailable,
        match=r"^Request for unknown model: 'm' version 2 is not at ready state: UNAVAILABLE: "
        r"model\.onnx is truncated$",
    ):
        registry.acquire("m", "2")
    with pytest.raises(
        NotFound,
        match=r"^Request for unknown model: 'm' has no available versions \(version 2 is "
        r"UNAVAILABLE: model\.onnx is truncated\)$",
    ):
        registry.acquire("m")


def test_withdrawn_version_takes_no_new_requests_but_finishes_inflight():
    registry = ModelRegistry()
    registry.publish(served("m", 1))
    inflight = registry.acquire("m")
    (withdrawn,) = registry.withdraw("m", [1])
    assert withdrawn is inflight
    with pytest.raises(
        NotFound, match=r"^Request for unknown model: 'm' has no available versions$"
    ):
        registry.acquire("m")
    assert not withdrawn.wait_drained(timeout_s=0.01)
    finished = threading.Thread(target=inflight.exit)
    finished.start()
    assert withdrawn.wait_drained(timeout_s=5)
    finished.join()


def test_publish_replacing_a_version_returns_the_old_one():
    registry = ModelRegistry()
    first = served("m", 1)
    registry.publish(first)
    second = served("m", 1)
    assert registry.publish(second) is first
    assert registry.get("m") is second


def test_state_changes_are_published_once_each():
    bus = EventBus()
    events = bus.subscribe(ModelStateChanged)
    registry = ModelRegistry(bus)
    registry.set_status("m", 1, ModelState.LOADING)
    registry.set_status("m", 1, ModelState.LOADING)
    registry.set_status("m", 1, ModelState.UNAVAILABLE, "boom")
    first = events.get(timeout=1)
    second = events.get(timeout=1)
    assert (first.state, second.state, second.reason) == ("LOADING", "UNAVAILABLE", "boom")
    assert events.get(timeout=0.01) is None


def test_slow_subscriber_drops_oldest_and_counts():
    bus = EventBus()
    events = bus.subscribe(max_events=2)
    for n in range(5):
        bus.publish(n)
    assert events.dropped == 3
    assert [events.get(0), events.get(0)] == [3, 4]


def test_withdrawing_several_versions_never_exposes_one_of_them_as_default():
    registry = ModelRegistry()
    for version in (1, 2, 4):
        registry.publish(served("m", version))
    withdrawn = registry.withdraw("m", [4, 2])
    assert sorted(s.version for s in withdrawn) == [2, 4]
    assert registry.get("m").version == 1


def test_a_version_whose_scheduler_stopped_is_unavailable_with_the_reason():
    bus = EventBus()
    events = bus.subscribe(ModelStateChanged)
    registry = ModelRegistry(bus)
    broken = served("m", 1)
    registry.publish(broken)
    reason = "model 'm' version 1: a batcher worker stopped: MemoryError"
    broken.scheduler.failure = reason
    assert registry.statuses("m")[1] == VersionStatus(ModelState.UNAVAILABLE, reason)
    assert not registry.is_ready("m")
    with pytest.raises(Unavailable) as raised:
        registry.acquire("m", "1")
    assert str(raised.value) == reason
    assert broken.inflight == 0
    ready = events.get(timeout=1)
    unavailable = events.get(timeout=1)
    assert (ready.state, unavailable.state, unavailable.reason) == ("READY", "UNAVAILABLE", reason)
    assert events.get(timeout=0.01) is None
