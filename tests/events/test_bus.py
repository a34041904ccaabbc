"""The event bus: a slow or stopped consumer never blocks a publisher, and
closing a subscription releases the thread waiting on it."""

from __future__ import annotations

import threading

import pytest

from edgebox.events import EventBus, ModelStateChanged, StreamState, StreamStatus


def model_event(index: int) -> ModelStateChanged:
    return ModelStateChanged("m", index, "READY", timestamp=float(index))


def wait_in_thread(call) -> tuple[threading.Thread, list, threading.Event]:
    """Runs ``call`` on a thread; ``started`` is set just before it blocks."""
    got: list = []
    started = threading.Event()

    def consume() -> None:
        started.set()
        got.append(call())

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    assert started.wait(5)
    return consumer, got, started


@pytest.mark.parametrize(
    ("method", "closed_answer"),
    [("get", None), ("get_batch", [])],
    ids=["get", "get_batch"],
)
def test_close_wakes_a_consumer_blocked_without_timeout(method, closed_answer):
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged)
    wait = getattr(subscription, method)
    call = (lambda: wait(None)) if method == "get" else (lambda: wait(10, None))
    consumer, got, _ = wait_in_thread(call)

    subscription.close()
    consumer.join(timeout=5)

    assert not consumer.is_alive(), f"{method} still blocked after close()"
    assert got == [closed_answer]
    assert subscription.closed


def test_closed_subscription_gets_nothing_more_and_leaves_the_bus():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged)
    bus.publish(model_event(1))
    subscription.close()
    bus.publish(model_event(2))

    assert subscription.get(timeout=0) is None
    assert subscription.get_batch(10, timeout=0) == []
    assert subscription not in bus.subscriptions


def test_get_batch_returns_what_is_queued_up_to_max_without_waiting():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged)
    for index in range(5):
        bus.publish(model_event(index))

    # A long timeout must not be waited out when events are already queued.
    first = subscription.get_batch(3, timeout=60)
    rest = subscription.get_batch(10, timeout=60)

    assert [event.version for event in first] == [0, 1, 2]
    assert [event.version for event in rest] == [3, 4]
    assert subscription.get_batch(10, timeout=0) == []


def test_get_batch_wakes_on_the_first_event_published():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged)
    consumer, got, _ = wait_in_thread(lambda: subscription.get_batch(10, timeout=30))

    bus.publish(model_event(7))
    consumer.join(timeout=5)

    assert not consumer.is_alive()
    assert [[event.version for event in batch] for batch in got] == [[7]]


def test_get_batch_rejects_a_max_below_one():
    subscription = EventBus().subscribe()
    with pytest.raises(ValueError, match="get_batch: expected max_events >= 1, got 0"):
        subscription.get_batch(0, timeout=0)


def test_full_subscription_drops_its_oldest_and_counts_them():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged, max_events=3)
    for index in range(7):
        bus.publish(model_event(index))

    assert subscription.dropped == 4
    assert [event.version for event in subscription.get_batch(10, timeout=0)] == [4, 5, 6]
    assert bus.dropped_total() == 4


def test_drop_total_counts_every_subscription_including_closed_ones():
    bus = EventBus()
    kept = bus.subscribe(max_events=1)
    closed = bus.subscribe(max_events=2)
    for index in range(4):
        bus.publish(model_event(index))
    closed.close()

    assert (kept.dropped, closed.dropped) == (3, 2)
    assert bus.dropped_total() == 5, "a Prometheus counter must never go down"


def test_publish_never_blocks_when_a_subscriber_is_full_and_not_reading():
    bus = EventBus()
    stalled = bus.subscribe(max_events=1)
    reader = bus.subscribe(ModelStateChanged)
    publisher = threading.Thread(
        target=lambda: [bus.publish(model_event(index)) for index in range(1000)], daemon=True
    )
    publisher.start()
    publisher.join(timeout=10)

    assert not publisher.is_alive(), "publish blocked on a full subscription"
    assert stalled.dropped == 999
    assert len(reader.get_batch(1000, timeout=0)) == 1000


def test_subscription_gets_only_the_kinds_it_asked_for():
    bus = EventBus()
    statuses = bus.subscribe(StreamStatus)
    bus.publish(model_event(1))
    status = StreamStatus(
        "cam", "file.avi", "m", StreamState.RUNNING, "", None, 0, 1, 1, 0, 0, 0, 1.0, "1", 0.0
    )
    bus.publish(status)

    assert statuses.get_batch(10, timeout=0) == [status]


def test_a_waker_is_called_when_an_event_lands_in_an_empty_queue_and_none_after_close():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged, max_events=2)
    woken: list[int] = []
    subscription.set_waker(lambda: woken.append(len(woken)))
    for index in range(3):
        bus.publish(model_event(index))
    bus.publish(
        StreamStatus("s", "src", "m", StreamState.RUNNING, "", None, 0, 0, 0, 0, 0, 0, 0.0, "", 0.0)
    )
    assert woken == [0], "the first event woke the consumer; the others found it awake"
    assert len(subscription.get_batch(10)) == 2
    bus.publish(model_event(3))
    assert woken == [0, 1], "an emptied queue wakes it again"
    subscription.close()
    bus.publish(model_event(4))
    assert woken == [0, 1]
