"""Every MQTT payload matches its JSON Schema in docs/schemas/, and so does
every example in docs/mqtt.md: the published contract, the code and the docs
cannot drift apart unnoticed.

Payloads are built the way the daemon builds them (the router adds
``device``, the spool adds ``seq`` and ``epoch`` and serialises), and once more as a real
subscriber receives them from mosquitto."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.alerts.rule_set import build_rules
from edgebox.alerts.settings import AlertSettings
from edgebox.events import (
    AlertEvent,
    Event,
    EventBus,
    FleetDocumentRefused,
    FleetModelChanged,
    ModelQuarantined,
    ModelResult,
    ModelStateChanged,
    MqttLinkChanged,
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
from edgebox.events.rollout import RolloutEvent
from edgebox.lifecycle.states import ModelState
from edgebox.mqtt import status
from edgebox.mqtt.bridge import build_forwarder
from edgebox.mqtt.routing import Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.spool import DROP_ORDER, Outgoing, Spool
from edgebox.mqtt.topics import Topics
from edgebox.repository.rollout_policy import POLICIES
from edgebox.summaries import summarize
from edgebox.tensors import Tensor
from fakes.fake_snapshots import fake_psutil_snapshot
from mosquitto_broker import Subscriber

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = REPO_ROOT / "docs" / "schemas"
MQTT_DOC = REPO_ROOT / "docs" / "mqtt.md"
DEVICE = "orin-07"

EVENT_TYPES: tuple[type[Event], ...] = (
    ModelStateChanged,
    StreamStatus,
    StreamResult,
    ModelResult,
    MqttLinkChanged,
    SpoolDropped,
    SpoolDegraded,
    ThermalChanged,
    TelemetrySnapshot,
    RolloutStarted,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    ModelQuarantined,
    FleetDocumentRefused,
    FleetModelChanged,
    AlertEvent,
)
SCHEMA_NAMES = ("edgebox.status", *(kind.SCHEMA for kind in EVENT_TYPES))


def schema_for(name: str) -> dict:
    """``edgebox.model_state`` -> docs/schemas/model_state.schema.json,
    ``edgebox.rollout.rolled_back`` -> docs/schemas/rollout_rolled_back.schema.json."""
    stem = name.removeprefix("edgebox.").replace(".", "_")
    path = SCHEMAS / f"{stem}.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))


def validate(document: dict) -> None:
    schema = schema_for(document["schema"]["name"])
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)


def lane_outputs() -> dict:
    return summarize(
        [
            Tensor("lane_scores", "FP32", np.array([0.91, 0.87], dtype=np.float32)),
            Tensor(
                "lane_points",
                "FP32",
                np.array([[412, 719], [455, 600], [866, 719], [820, 600]], dtype=np.float32),
            ),
            Tensor("lane_point_counts", "INT32", np.array([2, 2], dtype=np.int32)),
        ],
        "lanes",
    )


def one_of_each_event() -> list[Event]:
    return [
        ModelStateChanged("lane_pipeline", 2, "READY"),
        ModelStateChanged("broken", None, "UNAVAILABLE", "config.pbtxt:3:1: expected '{'"),
        StreamStatus(
            name="demo-road",
            source="synthetic:road",
            model="lane_pipeline",
            state=StreamState.RECONNECTING,
            reason="source ended",
            next_retry_at=1_700_000_001.5,
            reconnect_attempt=1,
            frames_captured=120,
            frames_inferred=118,
            frames_dropped=2,
            inference_failures=0,
            reconnects=1,
            fps=14.987,
            model_version="2",
            timestamp=1_700_000_000.0,
        ),
        StreamResult(
            "demo-road",
            "lane_pipeline",
            "2",
            118,
            1_700_000_000.25,
            1280,
            720,
            StreamLatency(3.21234, 0.5, 11.00049, 15.2),
            lane_outputs(),
        ),
        ModelResult(
            "square_diff",
            "1",
            "req-1",
            1_700_000_000.5,
            summarize([Tensor("SQUARE_DIFF", "FP32", np.zeros((1, 128), dtype=np.float32))]),
        ),
        MqttLinkChanged("refused", "broker.lan:8883", "Bad user name or password"),
        SpoolDropped({"result": 4210, "queue": 3}, "spool full or queue overflowed"),
        SpoolDegraded("spool '/var/lib/edgebox/mqtt/spool.sqlite': append failed: disk full"),
        ThermalChanged("tj", "warn", 85.5, 85.0),
        ThermalChanged("gpu", "normal", 79.5, 85.0),
        TelemetrySnapshot(
            source="sysfs",
            cpu_pct=12.5,
            cpu_per_core_pct=(20.0, 5.0, None, None),
            memory_used_bytes=4_223_496_192,
            memory_total_bytes=65_879_896_064,
            gpu={"load_pct": 52.3, "freq_mhz": 1300.5, "memory_used_bytes": None},
            emc_pct=None,
            temperatures_c={"cpu": 47.3, "gpu": 45.7, "tj": 47.3},
            power={"VDD_GPU_SOC": {"voltage_mv": 4992.0, "current_ma": 636.0, "power_mw": 3174.9}},
            total_power_mw=3174.9,
            fan_pct=25.9,
            nvpmodel="MAXN",
            nvpmodel_id=0,
            jetson_clocks=None,
            engines={"DLA0": {"online": False, "freq_mhz": None}},
            timestamp=1_700_000_000.0,
        ),
        fake_psutil_snapshot(
            cpu_pct=3.1,
            cpu_per_core_pct=(3.0, 3.2),
            memory_used_bytes=2_000_000_000,
            memory_total_bytes=8_000_000_000,
            timestamp=1_700_000_001.0,
        ),
        *rollout_events(),
        FleetDocumentRefused(
            "line-3", 18, "3f2a9c1b0d4e5a6f", "signature does not verify", timestamp=1_700_000_060.0
        ),
        FleetDocumentRefused("line-3", None, "", "not JSON", timestamp=1_700_000_061.0),
        FleetModelChanged("lane_detector", "downloading", 7, timestamp=1_700_000_062.0),
        FleetModelChanged(
            "lane_detector", "failed", 7, "sha256 mismatch", timestamp=1_700_000_063.0
        ),
        AlertEvent(
            "raised",
            "temperature",
            "critical",
            "gpu",
            "zone 'gpu' at 92.0 °C (warn 80, critical 90 °C)",
            1_700_000_070.0,
            timestamp=1_700_000_072.0,
        ),
        AlertEvent(
            "cleared",
            "stream_down",
            "warn",
            "demo-road",
            "stream 'demo-road' reconnecting for 31 s: source ended",
            1_700_000_080.0,
            timestamp=1_700_000_095.0,
        ),
    ]


def rollout_events() -> list[Event]:
    """One of each rollout event, with figures ``Rollouts`` gives: a shadow
    rollout started, progressing and promoted, another rejected by its
    agreement gate, a canary rolled back after promotion, a quarantine."""
    started = RolloutStarted(
        model="lane_pipeline",
        version=3,
        serving_version=2,
        policy="shadow",
        samples=0,
        samples_wanted=50,
        agreement=None,
        candidate_p95_ms=None,
        serving_p95_ms=None,
        errors=0,
        dropped=0,
        timestamp=1_700_000_000.0,
    )
    progress = dataclasses.replace(
        started,
        samples=19,
        agreement=18 / 19,
        candidate_p95_ms=12.123456,
        serving_p95_ms=9.87654,
        dropped=2,
        timestamp=1_700_000_005.0,
    )
    promoted = dataclasses.replace(
        progress,
        samples=50,
        agreement=49 / 50,
        reason="49/50 answers agree, p95 12.12 ms vs 9.88 ms",
        timestamp=1_700_000_020.0,
    )
    rejected = dataclasses.replace(
        progress,
        version=4,
        serving_version=3,
        samples=12,
        agreement=9 / 12,
        dropped=0,
        reason=(
            "rollout: 9/12 answers agree (lanes: 3 lanes, the serving version sees 2; "
            "min_agreement 0.95)"
        ),
        timestamp=1_700_000_400.0,
    )
    return [
        started,
        RolloutProgress(**_fields(progress)),
        RolloutPromoted(**_fields(promoted)),
        RolloutRejected(**_fields(rejected)),
        RolloutRolledBack(
            model="square_diff",
            version=2,
            serving_version=1,
            policy="canary",
            samples=7,
            samples_wanted=50,
            agreement=None,
            candidate_p95_ms=0.4,
            serving_p95_ms=None,
            errors=3,
            dropped=0,
            reason=(
                "rolled back to version 1: 3 of its last 7 requests failed after promotion "
                "(allowed 0): model 'square_diff' version 2: execute raised ValueError"
            ),
            timestamp=1_700_000_040.0,
        ),
        ModelQuarantined(
            "square_diff",
            3,
            "quarantined: the daemon died (SIGSEGV) while version 3 was executing at "
            "14:02:11; remove the folder or release it",
            timestamp=1_700_000_050.0,
        ),
    ]


def _fields(event: Event) -> dict:
    return {field.name: getattr(event, field.name) for field in dataclasses.fields(event)}


def spooled_documents(outgoing: list[Outgoing]) -> list[dict]:
    """The exact payload bytes the spool would publish, parsed back."""
    spool = Spool(None, 64 * 1024 * 1024)
    try:
        return [json.loads(row.payload) for row in spool.append(outgoing)]
    finally:
        spool.close()


def status_documents() -> list[dict]:
    identity = {"device": DEVICE, "edgebox_version": "0.9.0", "started_at": 1_700_000_000.0}
    serving = {
        "models": {
            "lane_pipeline": {"ready_versions": ["1", "2"]},
            "broken": {"ready_versions": []},
        },
        "streams": {"demo-road": "running"},
    }
    documents = [
        status.online(identity, serving, 1_700_000_001.0),
        status.offline(identity, "connection lost", 1_700_000_000.0),
        status.offline(identity, "shutdown", 1_700_000_002.0),
    ]
    return spooled_documents(
        [Outgoing("edgebox/orin-07/status", d, "status", retain=True) for d in documents]
    )


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_each_schema_is_a_valid_draft_2020_12_schema(name):
    schema = schema_for(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.SCHEMA)
def test_each_event_schema_names_exactly_the_event_fields_plus_schema_seq_epoch_and_device(
    kind,
):
    schema = schema_for(kind.SCHEMA)
    fields = {field.name for field in dataclasses.fields(kind)}
    assert set(schema["properties"]) == fields | {"schema", "seq", "epoch", "device"}
    assert set(schema["required"]) == fields | {"schema", "seq", "epoch", "device"}
    assert schema["additionalProperties"] is False
    assert schema["properties"]["schema"]["properties"]["name"] == {"const": kind.SCHEMA}


def test_schema_enums_are_the_states_the_code_publishes():
    def state_enum(name: str) -> list:
        return schema_for(name)["properties"]["state"]["enum"]

    assert state_enum("edgebox.model_state") == [s.value for s in ModelState]
    assert state_enum("edgebox.stream_status") == [s.value for s in StreamState]
    assert state_enum("edgebox.mqtt_link") == list(MqttLinkChanged.STATES)
    alert = schema_for("edgebox.alert")["properties"]
    assert alert["state"]["enum"] == list(AlertEvent.STATES)
    assert alert["severity"]["enum"] == list(AlertEvent.SEVERITIES)
    every_rule = build_rules(AlertSettings(), spool_capacity_bytes=1)
    assert alert["rule"]["enum"] == [rule.name for rule in every_rule]
    level = schema_for("edgebox.thermal")["properties"]["level"]["enum"]
    assert level == list(ThermalChanged.LEVELS)
    dropped = schema_for("edgebox.spool_dropped")["properties"]["dropped"]
    assert dropped["propertyNames"]["enum"] == [*DROP_ORDER, "queue"]
    rolled_out = [policy for policy in POLICIES if policy != "immediate"]
    for kind in EVENT_TYPES:
        if issubclass(kind, RolloutEvent):
            assert schema_for(kind.SCHEMA)["properties"]["policy"]["enum"] == rolled_out


@pytest.mark.parametrize("index", range(len(one_of_each_event())))
def test_each_routed_and_spooled_event_matches_its_schema(index):
    event = one_of_each_event()[index]
    message = Router(Topics("edgebox", DEVICE), DEVICE, qos=1).route(event)
    (document,) = spooled_documents([message])
    assert document["schema"]["name"] == event.SCHEMA
    validate(document)


def test_online_offline_and_last_will_status_documents_match_the_status_schema():
    online, will, shutdown = status_documents()
    assert [d["state"] for d in (online, will, shutdown)] == ["online", "offline", "offline"]
    for document in (online, will, shutdown):
        validate(document)


def test_the_status_schema_refuses_an_online_document_with_an_offline_reason():
    online = status_documents()[0]
    with pytest.raises(jsonschema.ValidationError):
        validate({**online, "reason": "shutdown"})


def test_a_payload_missing_its_seq_or_epoch_or_with_an_unknown_field_is_refused():
    message = Router(Topics("edgebox", DEVICE), DEVICE, qos=1).route(one_of_each_event()[0])
    (document,) = spooled_documents([message])
    for field in ("seq", "epoch"):
        with pytest.raises(jsonschema.ValidationError, match=f"'{field}' is a required property"):
            validate({k: v for k, v in document.items() if k != field})
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validate({**document, "extra": 1})


def doc_examples() -> list[dict]:
    text = MQTT_DOC.read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


def test_every_json_example_in_docs_mqtt_md_matches_its_schema():
    examples = doc_examples()
    for example in examples:
        validate(example)
    assert {e["schema"]["name"] for e in examples} == set(SCHEMA_NAMES)
    assert {e["state"] for e in examples if e["schema"]["name"] == "edgebox.status"} == {
        "online",
        "offline",
    }


def test_docs_mqtt_md_opens_with_the_demo_and_the_subscribe_command():
    opening = MQTT_DOC.read_text(encoding="utf-8")[:1500]
    assert "make run" in opening
    assert "mosquitto_sub -h 127.0.0.1 -p PORT -t 'edgebox/#' -v" in opening


class OneModelRegistry:
    """What ``build_forwarder`` asks of the registry for the status document."""

    def model_names(self) -> list[str]:
        return ["lane_pipeline"]

    def served_versions(self, name: str) -> dict[int, object]:
        return {2: object(), 1: object()}


def test_every_payload_a_subscriber_receives_from_the_forwarder_matches_its_schema(
    mosquitto, tmp_path, device_id
):
    settings = MqttSettings(
        url=mosquitto.url, device_id=device_id, spool_path=tmp_path / "spool.sqlite"
    )
    bus = EventBus()
    forwarder = build_forwarder(
        settings, bus, OneModelRegistry(), (), lambda: {"demo-road": "running"}
    )
    with Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber:
        forwarder.start()
        try:
            wait_for(lambda: forwarder.stats().state == "connected", what="the link")
            events = one_of_each_event()
            for event in events:
                bus.publish(event)
            subscriber.wait_for(
                lambda ms: (
                    len([m for m in ms if not m.topic.endswith("/status")]) >= len(events) + 1
                ),
                what="every event and the link's own 'connected'",
            )
        finally:
            assert forwarder.stop(5.0)
        subscriber.wait_for(
            lambda ms: any(b'"offline"' in m.payload for m in ms), what="the offline status"
        )
    documents = [json.loads(m.payload) for m in subscriber.messages()]
    for document in documents:
        validate(document)
    names = {d["schema"]["name"] for d in documents}
    assert names == set(SCHEMA_NAMES)
