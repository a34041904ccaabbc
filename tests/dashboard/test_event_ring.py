"""The events page's ring: numbered, bounded, results left out."""

from __future__ import annotations

from daemon_process import wait_for
from edgebox.dashboard.event_ring import EventRing
from edgebox.events import EventBus, ModelStateChanged, MqttLinkChanged, StreamLatency, StreamResult


def result() -> StreamResult:
    return StreamResult("cam", "m", "1", 0, 0.0, 4, 2, StreamLatency(0, 0, 0, 0), {})


def test_results_are_left_out_and_events_numbered_from_one():
    ring = EventRing(EventBus(), clock=lambda: 5.0)
    ring.add(ModelStateChanged("m", 1, "LOADING"))
    ring.add(result())
    ring.add(MqttLinkChanged("connected", "mqtt://b:1883"))
    events, last_id = ring.after(0)
    assert last_id == 2
    assert [(e["id"], e["schema"]["name"], e["time"]) for e in events] == [
        (1, "edgebox.model_state", 5.0),
        (2, "edgebox.mqtt_link", 5.0),
    ]


def test_only_the_newest_events_are_kept():
    ring = EventRing(EventBus(), max_events=3)
    for version in range(5):
        ring.add(ModelStateChanged("m", version, "READY"))
    events, last_id = ring.after(0)
    assert [e["version"] for e in events] == [2, 3, 4]
    assert last_id == 5


def test_the_thread_fills_the_ring_from_the_bus_until_stopped():
    bus = EventBus()
    ring = EventRing(bus)
    bus.publish(ModelStateChanged("early", 1, "LOADING"))  # before start: kept
    ring.start()
    bus.publish(ModelStateChanged("m", 1, "UNAVAILABLE", "load failed: no model.onnx"))
    wait_for(lambda: ring.after(0)[1] == 2, what="both events in the ring")
    ring.stop(5)
    events, _ = ring.after(0)
    assert [e["model"] for e in events] == ["early", "m"]
    assert ring.last_error("m") == "load failed: no model.onnx"
    assert bus.subscriptions == ()


def test_a_flood_of_results_never_pushes_an_event_out_of_the_rings_queue():
    bus = EventBus()
    ring = EventRing(bus)
    bus.publish(ModelStateChanged("m", 1, "READY"))
    for _ in range(2000):
        bus.publish(result())
    ring.start()
    try:
        events = wait_for(lambda: ring.after(0)[0], what="the model event")
    finally:
        ring.stop(5)
    assert [e["model"] for e in events] == ["m"]
    assert bus.dropped_total() == 0
