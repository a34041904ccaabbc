"""Telemetry's events reach MQTT where docs/mqtt.md says: thermal changes on
``events`` (kind ``event``, kept before results when the spool is full),
telemetry snapshots on ``telemetry`` (kind ``telemetry``)."""

from __future__ import annotations

from edgebox.events import TelemetrySnapshot, ThermalChanged
from edgebox.mqtt.routing import EVENT_KINDS, Router
from edgebox.mqtt.topics import Topics
from fakes.fake_snapshots import fake_psutil_snapshot


def router() -> Router:
    return Router(Topics("edgebox", "orin-07"), "orin-07", qos=1)


def snapshot() -> TelemetrySnapshot:
    return fake_psutil_snapshot()


def test_thermal_change_goes_to_the_events_topic_as_an_event():
    message = router().route(ThermalChanged("tj", "critical", 96.0, 95.0, timestamp=2.0))
    assert (message.topic, message.kind, message.qos) == ("edgebox/orin-07/events", "event", 1)
    assert message.document["level"] == "critical"
    assert message.document["device"] == "orin-07"
    assert ThermalChanged in EVENT_KINDS


def test_telemetry_snapshot_goes_to_the_telemetry_topic_as_telemetry():
    message = router().route(snapshot())
    assert (message.topic, message.kind) == ("edgebox/orin-07/telemetry", "telemetry")
    assert message.document["schema"]["name"] == "edgebox.telemetry"
    assert message.document["gpu"] is None
