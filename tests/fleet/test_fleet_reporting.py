"""The fleet's wire formats on the device's side: the reported state routed
to its retained topic as the status is (only the newest unsent one kept),
published as given, and the JSON Schemas of the reported state, the desired
document and its envelope, which the operator's tools and the device share."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jsonschema
import pytest

from daemon_process import wait_for
from edgebox.events import EventBus, FleetReported
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.mqtt.routing import Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.spool import Spool
from edgebox.mqtt.topics import Topics
from mosquitto_broker import Subscriber

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
DEVICE = "orin-07"


def schema(stem: str) -> dict:
    return json.loads((SCHEMAS / f"{stem}.schema.json").read_text(encoding="utf-8"))


def validate(document: dict, stem: str) -> None:
    jsonschema.validate(document, schema(stem), cls=jsonschema.Draft202012Validator)


def reported(generation: int, state: str = "serving") -> dict:
    return {
        "schema": "edgebox.fleet.reported/1",
        "device": DEVICE,
        "group": "line-3",
        "generation": generation,
        "at": 1_764_300_000.0 + generation,
        "models": {"lane_detector": {"state": state, "version": 7, "served": [6, 7], "reason": ""}},
        "refused": {
            "generation": 18,
            "key_id": "3f2a9c1b0d4e5a6f",
            "reason": "signature does not verify",
            "at": 1_764_300_001.0,
        },
    }


def desired() -> dict:
    artifact = {"url": "https://store.lan/lane_detector-7.tar.gz", "sha256": "a" * 64, "size": 1}
    return {
        "schema": "edgebox.fleet.desired/1",
        "group": "line-3",
        "generation": 17,
        "issued_at": "2026-11-28T05:00:00Z",
        "models": {
            "lane_detector": {
                "version": 7,
                "artifact": artifact,
                "rollout": {"policy": "shadow", "samples": 30},
                "targets": {"devices": ["orin-07"], "percent": 10},
                "previous": {"version": 6, "artifact": {**artifact, "sha256": "b" * 64}},
            }
        },
    }


def router() -> Router:
    return Router(Topics("edgebox", DEVICE), DEVICE, qos=1)


def test_the_reported_state_goes_retained_to_the_fleet_topic_as_given():
    document = reported(17)
    message = router().route(FleetReported(document))
    assert message.topic == "edgebox/orin-07/fleet"
    assert (message.kind, message.qos, message.retain, message.replaces_unsent) == (
        "status",
        1,
        True,
        True,
    )
    assert message.document == document
    assert message.document is not document, "the spool adds seq and epoch to its own copy"


def test_only_the_newest_unsent_report_is_kept():
    spool = Spool(None, 1024 * 1024)
    try:
        for generation in (15, 16, 17):
            spool.append([router().route(FleetReported(reported(generation)))])
        pending = spool.pending(10)
        dropped = spool.stats().dropped
    finally:
        spool.close()
    assert [json.loads(row.payload)["generation"] for row in pending] == [17]
    assert dropped == {}, "a replaced report is not a drop"


def test_a_spooled_report_matches_the_reported_schema():
    spool = Spool(None, 1024 * 1024)
    try:
        (row,) = spool.append([router().route(FleetReported(reported(17)))])
    finally:
        spool.close()
    document = json.loads(row.payload)
    assert {"seq", "epoch"} <= set(document)
    validate(document, "fleet_reported")
    validate({**reported(0), "models": {}, "refused": None}, "fleet_reported")


@pytest.mark.parametrize(
    "change",
    [
        {"schema": "edgebox.fleet.reported/2"},
        {"generation": -1},
        {"models": {"m": {"state": "sleeping", "version": 1, "served": [], "reason": ""}}},
        {"refused": {"generation": 1, "key_id": "XYZ", "reason": "r", "at": 1.0}},
        {"extra": 1},
    ],
)
def test_the_reported_schema_refuses_what_the_contract_does_not_allow(change):
    with pytest.raises(jsonschema.ValidationError):
        validate({**reported(17), **change}, "fleet_reported")


def test_the_desired_document_and_its_envelope_match_their_schemas():
    document = desired()
    validate(document, "fleet_desired")
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    envelope = {
        "document": base64.b64encode(data).decode(),
        "key_id": "3f2a9c1b0d4e5a6f",
        "signature": base64.b64encode(bytes(64)).decode(),
    }
    validate(envelope, "fleet_envelope")
    with pytest.raises(jsonschema.ValidationError):
        validate({**envelope, "key_id": "3F2A"}, "fleet_envelope")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("generation",), 0),
        (("group",), "line/3"),
        (("models", "lane_detector", "artifact", "url"), "file:///etc/passwd"),
        (("models", "lane_detector", "artifact", "sha256"), "A" * 64),
        (("models", "lane_detector", "artifact", "size"), 0),
        (("models", "lane_detector", "rollout", "policy"), "yolo"),
        (("models", "lane_detector", "rollout", "frob"), 1),
        (("models", "lane_detector", "targets", "percent"), 101),
        (("models", "lane_detector", "command"), "rm -rf /"),
    ],
)
def test_the_desired_schema_refuses_each_violation(path, value):
    document = desired()
    where = document
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(document, "fleet_desired")


def test_the_model_states_are_the_same_in_the_report_and_the_event():
    states = schema("fleet_reported")["properties"]["models"]["additionalProperties"]
    event = schema("fleet_model_changed")["properties"]["state"]["enum"]
    assert states["properties"]["state"]["enum"] == event


def test_a_late_subscriber_gets_the_newest_report_retained(mosquitto, tmp_path, device_id):
    settings = MqttSettings(
        url=mosquitto.url, device_id=device_id, spool_path=tmp_path / "spool.sqlite"
    )
    bus = EventBus()
    forwarder = MqttForwarder(
        settings,
        bus,
        Router(Topics("edgebox", device_id), device_id, settings.qos),
        {"device": device_id, "edgebox_version": "test", "started_at": 0.0},
        lambda: {"models": {}, "streams": {}},
    )
    forwarder.start()
    try:
        wait_for(lambda: forwarder.stats().state == "connected", what="the link")
        bus.publish(FleetReported({**reported(16), "device": device_id}))
        bus.publish(FleetReported({**reported(17), "device": device_id}))
        wait_for(
            lambda: forwarder.stats().spool_rows == 0 and forwarder.stats().acknowledged >= 2,
            what="the reports acknowledged",
        )
        with Subscriber(mosquitto, f"edgebox/{device_id}/fleet") as late:
            (message,) = late.wait_for(lambda ms: ms, what="the retained report")
    finally:
        assert forwarder.stop(5.0)
    assert message.retain
    document = json.loads(message.payload)
    assert (document["generation"], document["device"]) == (17, device_id)
    validate(document, "fleet_reported")
