"""Every event's JSON form names its schema first, then its fields; it is what
MQTT and the dashboard send, so it must always survive ``json.dumps``."""

from __future__ import annotations

import dataclasses
import json

import pytest

import edgebox.events as events
from edgebox.events import (
    AlertEvent,
    Event,
    FleetDocumentRefused,
    FleetModelChanged,
    FleetReported,
    ModelQuarantined,
    ModelResult,
    ModelStateChanged,
    MqttLinkChanged,
    ResultLatency,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    RolloutStarted,
    SpoolDegraded,
    SpoolDropped,
    StreamLatency,
    StreamResult,
    StreamState,
    StreamStatus,
    TelemetrySnapshot,
    ThermalChanged,
)

LATENCY = StreamLatency(
    capture_ms=2.12345, queue_ms=0.3, inference_ms=18.2, total_ms=21.0004, result_ms=19.00049
)

ROLLOUT = dict(
    model="lane_detector",
    version=2,
    serving_version=1,
    policy="shadow",
    samples=12,
    samples_wanted=30,
    agreement=11 / 12,
    candidate_p95_ms=38.123456,
    serving_p95_ms=36.9,
    errors=0,
    dropped=1,
    timestamp=11.0,
)

EXAMPLES = {
    AlertEvent: AlertEvent(
        "raised", "temperature", "warn", "gpu", "zone 'gpu' at 82.0 °C", 14.5, timestamp=15.0
    ),
    ModelStateChanged: ModelStateChanged("lane", 2, "READY", timestamp=10.0),
    RolloutStarted: RolloutStarted(**{**ROLLOUT, "samples": 0, "agreement": None}),
    RolloutProgress: RolloutProgress(**ROLLOUT),
    RolloutPromoted: RolloutPromoted(**ROLLOUT, reason="30/30 answers agree"),
    RolloutRejected: RolloutRejected(**ROLLOUT, reason="rollout: 0/2 answers agree (...)"),
    RolloutRolledBack: RolloutRolledBack(**ROLLOUT, reason="rolled back to version 1: ..."),
    ModelQuarantined: ModelQuarantined("lane_detector", 2, "quarantined: ...", timestamp=12.0),
    FleetDocumentRefused: FleetDocumentRefused("line-3", 18, "0" * 16, "stale", timestamp=13.0),
    FleetModelChanged: FleetModelChanged("lane_detector", "serving", 7, timestamp=14.0),
    FleetReported: FleetReported({"schema": "edgebox.fleet.reported/1", "generation": 0}),
    StreamResult: StreamResult(
        "cam", "lane", "1", 118, 20.5, 640, 360, LATENCY, {"lanes": [{"score": 0.9}]}, 20.52
    ),
    StreamStatus: StreamStatus(
        "cam",
        "file.avi",
        "lane",
        StreamState.RECONNECTING,
        "ended",
        31.0,
        2,
        10,
        9,
        1,
        0,
        3,
        14.98765,
        "1",
        30.0,
        ResultLatency(3, 19.0004, 25.5, 25.5, 25.5, ((20.0, 1), (50.0, 2), (None, 0))),
    ),
    ModelResult: ModelResult("lane", "1", "req-7", 12.5, {"score": [0.5]}),
    MqttLinkChanged: MqttLinkChanged("refused", "mqtt://127.0.0.1:1883", "not authorised", 3.0),
    SpoolDropped: SpoolDropped({"result": 12, "telemetry": 0}, "spool full", timestamp=4.0),
    SpoolDegraded: SpoolDegraded("disk is read-only", timestamp=5.0),
    ThermalChanged: ThermalChanged("tj", "warn", 85.5, 85.0, timestamp=6.0),
    TelemetrySnapshot: TelemetrySnapshot(
        source="sysfs",
        cpu_pct=12.345,
        cpu_per_core_pct=(10.0, None),
        memory_used_bytes=4 << 30,
        memory_total_bytes=64 << 30,
        gpu={"load_pct": 52.349, "freq_mhz": 1300.5, "memory_used_bytes": None},
        emc_pct=None,
        temperatures_c={"tj": 47.3125},
        power={"VDD_GPU_SOC": {"voltage_mv": 4992.0, "current_ma": 636.0, "power_mw": 3174.912}},
        total_power_mw=6743.0,
        fan_pct=25.9,
        nvpmodel="MAXN",
        nvpmodel_id=0,
        jetson_clocks=None,
        engines={"DLA0": {"online": True, "freq_mhz": None}},
        timestamp=7.123456,
    ),
}

EXPORTED_EVENTS = sorted(
    (
        value
        for value in vars(events).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    ),
    key=lambda kind: kind.__name__,
)


def test_every_exported_event_has_an_example_here():
    assert {kind.__name__ for kind in EXPORTED_EVENTS} == {kind.__name__ for kind in EXAMPLES}


@pytest.mark.parametrize("kind", EXPORTED_EVENTS, ids=lambda kind: kind.__name__)
def test_as_dict_starts_with_the_schema_and_survives_json(kind):
    event = EXAMPLES[kind]
    document = event.as_dict()

    assert next(iter(document)) == "schema"
    assert document["schema"] == {"name": kind.SCHEMA, "version": 1}
    assert kind.SCHEMA.startswith("edgebox.")
    assert list(document)[1:] == [f.name for f in dataclasses.fields(kind)]
    assert json.loads(json.dumps(document, allow_nan=False)) == document


@pytest.mark.parametrize("kind", EXPORTED_EVENTS, ids=lambda kind: kind.__name__)
def test_events_are_frozen(kind):
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXAMPLES[kind].timestamp = 0.0


def test_schema_names_are_distinct_per_topic_payload():
    assert {kind.__name__: kind.SCHEMA for kind in EXPORTED_EVENTS} == {
        "AlertEvent": "edgebox.alert",
        "FleetDocumentRefused": "edgebox.fleet.document_refused",
        "FleetModelChanged": "edgebox.fleet.model_changed",
        "FleetReported": "edgebox.fleet.reported",
        "ModelQuarantined": "edgebox.model.quarantined",
        "ModelResult": "edgebox.model_result",
        "ModelStateChanged": "edgebox.model_state",
        "MqttLinkChanged": "edgebox.mqtt_link",
        "RolloutProgress": "edgebox.rollout.progress",
        "RolloutPromoted": "edgebox.rollout.promoted",
        "RolloutRejected": "edgebox.rollout.rejected",
        "RolloutRolledBack": "edgebox.rollout.rolled_back",
        "RolloutStarted": "edgebox.rollout.started",
        "SpoolDegraded": "edgebox.spool_degraded",
        "SpoolDropped": "edgebox.spool_dropped",
        "StreamResult": "edgebox.stream_result",
        "StreamStatus": "edgebox.stream_status",
        "TelemetrySnapshot": "edgebox.telemetry",
        "ThermalChanged": "edgebox.thermal",
    }


def test_stream_result_rounds_latency_to_the_microsecond():
    assert EXAMPLES[StreamResult].as_dict()["latency"] == {
        "capture_ms": 2.123,
        "queue_ms": 0.3,
        "inference_ms": 18.2,
        "total_ms": 21.0,
        "result_ms": 19.0,
    }


def test_stream_status_gives_its_state_as_a_value_and_fps_to_two_places():
    document = EXAMPLES[StreamStatus].as_dict()
    assert (document["state"], document["fps"]) == ("reconnecting", 14.99)
    assert document["result_latency"] == {
        "count": 3,
        "p50_ms": 19.0,
        "p90_ms": 25.5,
        "p99_ms": 25.5,
        "max_ms": 25.5,
        "buckets": [[20.0, 1], [50.0, 2], [None, 0]],
    }


def test_telemetry_snapshot_rounds_readings_to_two_places_but_not_its_timestamp():
    document = EXAMPLES[TelemetrySnapshot].as_dict()
    assert (document["cpu_pct"], document["gpu"]["load_pct"]) == (12.35, 52.35)
    assert document["temperatures_c"] == {"tj": 47.31}
    assert document["power"]["VDD_GPU_SOC"]["power_mw"] == 3174.91
    assert (document["cpu_per_core_pct"], document["timestamp"]) == ([10.0, None], 7.123456)


def test_thermal_level_must_be_one_the_guard_reports():
    with pytest.raises(
        ValueError,
        match="ThermalChanged: expected level 'normal', 'warn' or 'critical', got 'hot'",
    ):
        ThermalChanged("tj", "hot", 90.0, 85.0)


def test_mqtt_link_state_must_be_one_the_outbox_reports():
    with pytest.raises(
        ValueError,
        match=(
            "MqttLinkChanged: expected state 'connected', 'disconnected', 'refused' or "
            "'conflict', got 'up'"
        ),
    ):
        MqttLinkChanged("up", "mqtt://127.0.0.1:1883")


def test_rollout_events_round_their_figures():
    document = EXAMPLES[RolloutProgress].as_dict()
    assert document["agreement"] == 0.9167 and document["candidate_p95_ms"] == 38.1235
    assert EXAMPLES[RolloutStarted].as_dict()["agreement"] is None


def test_alert_state_and_severity_must_be_ones_the_evaluator_publishes():
    with pytest.raises(
        ValueError, match="AlertEvent: expected state 'raised' or 'cleared', got 'on'"
    ):
        AlertEvent("on", "memory", "warn", "memory", "", 1.0)
    with pytest.raises(
        ValueError, match="AlertEvent: expected severity 'warn' or 'critical', got 'info'"
    ):
        AlertEvent("raised", "memory", "info", "memory", "", 1.0)
