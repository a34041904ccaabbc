"""The checks of what the daemon needs from this machine, against real
sockets, a real mosquitto and a real repository: a port another program
holds fails, the broker is reached with the configured credentials and a
wrong password fails, and a broken repository names its problem."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from edgebox.mqtt.settings import MqttSettings
from edgebox.selftest.environment import environment_checks, mqtt_check
from edgebox.selftest.report import Status
from edgebox.settings import load_settings
from model_fixtures import add_add_sub
from mosquitto_broker import MosquittoBroker


def settings_for(tmp_path: Path, repository: Path, **flags):
    """The defaults and ``flags``, and a file of its own (not /etc/edgebox's)."""
    empty = tmp_path / "edgebox.yaml"
    empty.write_text("{}\n")
    flags = {"model_repository": str(repository), "host": "127.0.0.1", **flags}
    flags.setdefault("state_directory", str(tmp_path / "state"))
    return load_settings(flags, config_file=empty, environ={})


def by_name(checks):
    return {check.name: check for check in checks}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def repository(tmp_path) -> Path:
    folder = tmp_path / "repo"
    add_add_sub(folder)
    return folder


def test_free_ports_and_a_sound_repository_pass(tmp_path, repository):
    ports = {name: free_port() for name in ("http_port", "grpc_port", "metrics_port")}
    checks = by_name(environment_checks(settings_for(tmp_path, repository, **ports)))
    assert checks["ports"].status is Status.PASS
    assert checks["model repository"].status is Status.PASS
    assert checks["MQTT broker"].status is Status.SKIPPED


def test_a_port_another_program_holds_fails_unless_the_daemon_holds_it(tmp_path, repository):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        settings = settings_for(tmp_path, repository, http_port=taken, grpc_port=free_port())
        alone = by_name(environment_checks(settings))["ports"]
        beside_the_daemon = by_name(environment_checks(settings, daemon_running=True))["ports"]
    assert alone.status is Status.FAIL
    assert f"HTTP 127.0.0.1:{taken}" in alone.detail
    assert beside_the_daemon.status is Status.PASS


def test_a_repository_with_problems_fails_naming_the_first(tmp_path):
    broken = tmp_path / "models"
    (broken / "m" / "1").mkdir(parents=True)
    (broken / "m" / "config.pbtxt").write_text(
        'name: "m"\nplatform: "onnxruntime_onnx"\nnonsense {'
    )
    check = by_name(environment_checks(settings_for(tmp_path, broken)))["model repository"]
    assert check.status is Status.FAIL
    assert "config.pbtxt" in check.detail


def test_the_broker_is_reached_with_the_configured_login(tmp_path):
    password_file = tmp_path / "password"
    password_file.write_text("s3cret-pass\n")
    password_file.chmod(0o600)
    with MosquittoBroker(tmp_path / "broker", users={"device": "s3cret-pass"}) as broker:
        right = MqttSettings(url=broker.url, username="device", password_file=password_file)
        assert mqtt_check(right).status is Status.PASS
        password_file.write_text("wrong-pass\n")
        wrong = mqtt_check(
            MqttSettings(url=broker.url, username="device", password_file=password_file)
        )
    assert wrong.status is Status.FAIL
    assert "refused the login" in wrong.detail


def test_a_broker_nobody_listens_for_fails_at_once(tmp_path):
    check = mqtt_check(MqttSettings(url=f"mqtt://127.0.0.1:{free_port()}"), timeout_s=2)
    assert check.status is Status.FAIL
    assert "127.0.0.1" in check.detail


def test_the_spool_disk_is_checked_against_the_spool_cap(tmp_path, repository):
    settings = settings_for(
        tmp_path, repository, mqtt_url="mqtt://127.0.0.1:1", mqtt_spool_path=str(tmp_path / "s.db")
    )
    check = by_name(environment_checks(settings))["spool disk"]
    assert check.status is Status.PASS
    assert check.facts["folder"] == str(tmp_path)
    too_big = settings_for(
        tmp_path,
        repository,
        mqtt_url="mqtt://127.0.0.1:1",
        mqtt_spool_path=str(tmp_path / "s.db"),
        mqtt_spool_max_mb=str(10**9),
    )
    assert by_name(environment_checks(too_big))["spool disk"].status is Status.FAIL
