"""MqttSettings itself: defaults, the broker URL taken apart, what is derived
from the hostname, the password read from its file (and never shown), and
each problem ``problems()`` names. Parsing from YAML, environment and flags is
pinned in tests/test_settings.py.

(Named test_mqtt_settings.py: tests/test_settings.py already holds the module
name test_settings for pytest.)
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from edgebox.mqtt.identity import default_device_id, hostname_topic_level
from edgebox.mqtt.settings import BrokerUrl, MqttSettings
from field_docstrings import documented_fields

SECRET = "hunter2-not-for-logs"


def problems(**fields) -> list[tuple[str, str]]:
    return list(MqttSettings(**fields).problems())


def password_file(tmp_path: Path, text: str = SECRET + "\n") -> Path:
    path = tmp_path / "mqtt.password"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    settings = MqttSettings()
    assert (settings.url, settings.protocol, settings.keepalive, settings.qos) == (
        "mqtt://127.0.0.1:1883",
        "5",
        30,
        1,
    )
    assert (settings.topic_prefix, settings.spool_max_mb) == ("edgebox", 64)
    assert (settings.queue_events, settings.max_inflight) == (10000, 20)
    assert settings.resolved_spool_path == Path("/var/lib/edgebox/mqtt/spool.sqlite")
    assert settings.password() is None
    assert problems() == []


def test_every_field_has_a_docstring() -> None:
    assert documented_fields(MqttSettings) == {f.name for f in dataclasses.fields(MqttSettings)}


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("mqtt://127.0.0.1:1883", BrokerUrl("mqtt", "127.0.0.1", 1883, "", False, "tcp")),
        ("mqtt://broker", BrokerUrl("mqtt", "broker", 1883, "", False, "tcp")),
        ("mqtts://broker.lan/", BrokerUrl("mqtts", "broker.lan", 8883, "", True, "tcp")),
        ("ws://broker", BrokerUrl("ws", "broker", 80, "/mqtt", False, "websockets")),
        ("wss://broker:9443/ws", BrokerUrl("wss", "broker", 9443, "/ws", True, "websockets")),
        ("mqtt://[::1]:1884", BrokerUrl("mqtt", "::1", 1884, "", False, "tcp")),
    ],
)
def test_broker_url_is_taken_apart_with_default_ports(url: str, parsed: BrokerUrl) -> None:
    assert MqttSettings(url=url).parsed_url == parsed
    assert problems(url=url) == []


EXPECTED_URL = "expected mqtt://HOST[:PORT], mqtts://, ws:// or wss://"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://broker:1883", f"{EXPECTED_URL}, got 'http://broker:1883'"),
        ("broker:1883", f"{EXPECTED_URL}, got 'broker:1883'"),
        ("mqtt://:1883", f"{EXPECTED_URL}, got 'mqtt://:1883' (no host)"),
        ("mqtt://broker:99999", f"{EXPECTED_URL}, got a URL whose port is not 1..65535"),
        ("mqtt://broker:0", f"{EXPECTED_URL}, got a URL whose port is not 1..65535"),
        ("mqtt://broker:x", f"{EXPECTED_URL}, got a URL whose port is not 1..65535"),
        (
            "mqtt://broker/topic",
            f"{EXPECTED_URL} (a path only with ws:// or wss://), got 'mqtt://broker/topic'",
        ),
        (
            "ws://broker/mqtt?x=1",
            f"{EXPECTED_URL} (a path only with ws:// or wss://), got 'ws://broker/mqtt?x=1'",
        ),
    ],
)
def test_bad_broker_url_is_named(url: str, message: str) -> None:
    assert problems(url=url) == [("url", message)]


def test_credentials_in_the_url_are_refused_without_repeating_them() -> None:
    found = problems(url=f"mqtt://edgebox:{SECRET}@broker:1883")
    assert found == [("url", "must not hold credentials; use username and password_file")]


def test_device_and_client_id_default_to_this_machines_id() -> None:
    machine = default_device_id()
    assert machine.startswith(hostname_topic_level(socket.gethostname())[:55])
    assert MqttSettings().resolved_device_id == machine
    assert MqttSettings().resolved_client_id == f"edgebox-{machine}"
    assert MqttSettings(device_id="cab3").resolved_client_id == "edgebox-cab3"
    assert MqttSettings(device_id="cab3", client_id="fleet-9").resolved_client_id == "fleet-9"
    assert list(MqttSettings(device_id=machine).problems()) == []


def test_spool_path_given_is_used(tmp_path: Path) -> None:
    spool = tmp_path / "spool.sqlite"
    assert MqttSettings(spool_path=spool).resolved_spool_path == spool


def test_password_is_read_from_its_file_stripped(tmp_path: Path) -> None:
    path = password_file(tmp_path, f"  {SECRET} \n\n")
    settings = MqttSettings(username="edgebox", password_file=path)
    assert settings.password() == SECRET
    assert list(settings.problems()) == []
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'{path}' is empty"),
        (" \n", "'{path}' is empty"),
        (f"{SECRET}\n{SECRET}2\n", "'{path}' holds 2 lines; expected the password on one line"),
    ],
)
def test_bad_password_file_is_named_never_quoted(tmp_path: Path, text: str, message: str) -> None:
    path = password_file(tmp_path, text)
    found = problems(username="edgebox", password_file=path)
    assert found == [("password_file", message.format(path=path))]
    assert SECRET not in repr(found)


def test_unreadable_password_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.password"
    assert problems(username="edgebox", password_file=missing) == [
        ("password_file", f"cannot read '{missing}': No such file or directory")
    ]


def test_password_without_a_username_is_refused(tmp_path: Path) -> None:
    assert problems(password_file=password_file(tmp_path)) == [
        ("password_file", "needs username too")
    ]


def test_tls_files_must_be_readable_and_need_a_tls_url(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert problems(url="mqtts://broker", ca_file=ca) == []
    assert problems(url="mqtt://broker", ca_file=ca) == [
        ("ca_file", "needs an mqtts:// or wss:// url, got mqtt://")
    ]
    missing = tmp_path / "client.pem"
    assert problems(url="wss://broker", cert_file=missing, key_file=ca) == [
        ("cert_file", f"cannot read '{missing}': No such file or directory")
    ]


def test_client_certificate_and_key_go_together(tmp_path: Path) -> None:
    pem = tmp_path / "client.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    assert problems(url="mqtts://broker", cert_file=pem) == [
        ("cert_file", "needs key_file too (a client certificate goes with its key)")
    ]
    assert problems(url="mqtts://broker", key_file=pem) == [
        ("key_file", "needs cert_file too (a client certificate goes with its key)")
    ]


TOPIC_PREFIX = (
    "expected topic levels without '+', '#' or NUL, not starting with '/' or '$' nor ending "
    "with '/', got "
)
DEVICE_ID = "expected 1-64 letters, digits, '_', '.' or '-' (starting with a letter or digit), got "


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"protocol": "4"}, ("protocol", "expected '5' or '3.1.1', got '4'")),
        ({"keepalive": 4}, ("keepalive", "expected 5..3600 seconds, got 4")),
        ({"keepalive": 3601}, ("keepalive", "expected 5..3600 seconds, got 3601")),
        ({"qos": 3}, ("qos", "expected 0, 1 or 2, got 3")),
        ({"qos": -1}, ("qos", "expected 0, 1 or 2, got -1")),
        ({"topic_prefix": ""}, ("topic_prefix", TOPIC_PREFIX + "''")),
        ({"topic_prefix": "/fleet"}, ("topic_prefix", TOPIC_PREFIX + "'/fleet'")),
        ({"topic_prefix": "fleet/"}, ("topic_prefix", TOPIC_PREFIX + "'fleet/'")),
        ({"topic_prefix": "fleet/+"}, ("topic_prefix", TOPIC_PREFIX + "'fleet/+'")),
        ({"topic_prefix": "fleet/#"}, ("topic_prefix", TOPIC_PREFIX + "'fleet/#'")),
        ({"topic_prefix": "$SYS"}, ("topic_prefix", TOPIC_PREFIX + "'$SYS'")),
        ({"device_id": "cab/3"}, ("device_id", DEVICE_ID + "'cab/3'")),
        ({"client_id": "a\0b"}, ("client_id", "must not hold a NUL character")),
        ({"spool_max_mb": 0.0}, ("spool_max_mb", "expected a number >= 0.25, got 0.0")),
        ({"spool_max_mb": 0.2}, ("spool_max_mb", "expected a number >= 0.25, got 0.2")),
        ({"spool_write_delay_s": -1}, ("spool_write_delay_s", "expected 0..60 seconds, got -1")),
        ({"spool_write_delay_s": 61}, ("spool_write_delay_s", "expected 0..60 seconds, got 61")),
        ({"queue_events": 99}, ("queue_events", "expected an integer >= 100, got 99")),
        ({"max_inflight": 0}, ("max_inflight", "expected 1..1000, got 0")),
        ({"max_inflight": 1001}, ("max_inflight", "expected 1..1000, got 1001")),
    ],
)
def test_each_bad_value_is_named(fields: dict, problem: tuple[str, str]) -> None:
    assert problems(**fields) == [problem]


@pytest.mark.parametrize(
    "fields",
    [
        {"protocol": "3.1.1", "qos": 0, "keepalive": 5},
        {"qos": 2, "keepalive": 3600, "topic_prefix": "fleet/site-1", "device_id": "cab_3"},
        {"queue_events": 100, "max_inflight": 1000, "spool_max_mb": 0.25},
        {"spool_write_delay_s": 0, "spool_max_mb": 1e6},
        {"spool_write_delay_s": 60},
    ],
)
def test_values_at_the_edges_are_accepted(fields: dict) -> None:
    assert problems(**fields) == []
