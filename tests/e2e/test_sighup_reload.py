"""A real SIGHUP to the real daemon: the configuration file is read again,
streams follow it, settings that need a restart are named, a broken file
leaves the daemon serving, and MQTT moves to another broker."""

from __future__ import annotations

import json
import re
import signal

from daemon_process import DaemonProcess, wait_for
from mosquitto_broker import MosquittoBroker, Subscriber
from scripts.demo_broker import free_loopback_port

ROAD = "{{name: {name}, source: 'synthetic:road', model: add_sub}}"


def hang_up(daemon: DaemonProcess, reloads_before: int) -> str:
    """SIGHUP, then the log once the reload after ``reloads_before`` has ended."""
    daemon.process.send_signal(signal.SIGHUP)
    ended = re.compile(r"settings reload(ed:|: .*; keeping the current settings)")
    return wait_for(
        lambda: len(ended.findall(daemon.log())) > reloads_before and daemon.log(),
        30,
        what="the reload to end",
    )


def test_sighup_applies_streams_names_restart_settings_and_survives_a_typo(
    tmp_path, start_daemon, add_sub_repository
):
    config = tmp_path / "edgebox.yaml"
    config.write_text(f"streams:\n  - {ROAD.format(name='first')}\n")
    daemon = start_daemon(add_sub_repository, "--config", str(config))
    wait_for(
        lambda: "stream 'first': 'synthetic:road' -> model 'add_sub'" in daemon.log(),
        what="stream 'first' to start",
    )
    port = daemon.port

    config.write_text(f"http_thread_count: 8\nstreams:\n  - {ROAD.format(name='second')}\n")
    log = hang_up(daemon, 0)

    assert "setting 'http_thread_count' changed; it takes effect after a restart" in log
    assert "settings reloaded: applied 'streams' (started 'second'; stopped 'first')" in log
    assert re.search(r"stream 'first': stopped \(captured \d+", log)
    assert "stream 'second': 'synthetic:road' -> model 'add_sub'" in log
    assert daemon.is_ready()

    config.write_text("log_verbos: 1\n")
    log = hang_up(daemon, 1)

    assert re.search(
        rf"settings reload: {re.escape(str(config))}(:1)?: unknown setting 'log_verbos'; "
        r"did you mean 'log_verbose'\?; keeping the current settings",
        log,
    )
    assert daemon.is_ready()
    assert daemon.port == port
    assert "stream 'second': stopped" not in log


def test_sighup_moves_mqtt_to_another_broker_keeping_the_spool(
    mosquitto, tmp_path, start_daemon, device_id, add_sub_repository
):
    spool = tmp_path / "spool.sqlite"
    config = tmp_path / "edgebox.yaml"

    def write_config(url: str) -> None:
        config.write_text(
            f"mqtt: {{url: '{url}', device_id: {device_id}, spool_path: '{spool}'}}\n"
        )

    write_config(mosquitto.url)
    with (
        MosquittoBroker(tmp_path / "second-broker") as second,
        Subscriber(second, f"edgebox/{device_id}/status") as watcher,
    ):
        daemon = start_daemon(add_sub_repository, "--config", str(config))
        wait_for(
            lambda: f"MQTT: connected to 127.0.0.1:{mosquitto.port}" in daemon.log(),
            what="the daemon to reach the first broker",
        )

        write_config(second.url)
        log = hang_up(daemon, 0)

        assert "settings reloaded: applied 'mqtt.url'" in log
        wait_for(
            lambda: f"MQTT: connected to 127.0.0.1:{second.port}" in daemon.log(),
            what="the daemon to reach the second broker",
        )
        status = watcher.wait_for(
            lambda messages: [json.loads(m.payload) for m in messages],
            what="a status on the second broker",
        )
        assert status[-1]["state"] == "online"
        assert status[-1]["models"]["add_sub"] == {"ready_versions": ["1"]}
        assert spool.exists()
        assert daemon.stop() == 0


def test_messages_spooled_for_an_unreachable_broker_reach_the_one_a_sighup_names(
    mosquitto, tmp_path, start_daemon, device_id, add_sub_repository
):
    spool = tmp_path / "spool.sqlite"
    config = tmp_path / "edgebox.yaml"
    dead = f"mqtt://127.0.0.1:{free_loopback_port()}"
    config.write_text(f"mqtt: {{url: '{dead}', device_id: {device_id}, spool_path: '{spool}'}}\n")
    with Subscriber(mosquitto, f"edgebox/{device_id}/events") as watcher:
        daemon = start_daemon(add_sub_repository, "--config", str(config))
        wait_for(lambda: "unreachable" in daemon.log(), what="the daemon to start spooling")

        config.write_text(
            f"mqtt: {{url: '{mosquitto.url}', device_id: {device_id}, spool_path: '{spool}'}}\n"
        )
        hang_up(daemon, 0)

        events = watcher.wait_for(
            lambda messages: [
                document
                for document in (json.loads(m.payload) for m in messages)
                if document.get("model") == "add_sub" and document.get("state") == "READY"
            ],
            what="the spooled READY event of 'add_sub' on the new broker",
        )
        assert events[0]["device"] == device_id
        assert daemon.stop() == 0


def test_sighup_after_fixing_the_broker_password_logs_in_at_once(
    tmp_path, start_daemon, add_sub_repository
):
    """Issue 19: the same password_file path with a fixed password inside was
    "nothing applied", and the daemon waited out its slow re-login backoff
    (30 s and up) before trying again."""
    password_file = tmp_path / "mqtt.password"
    password_file.write_text("wrong\n")
    config = tmp_path / "edgebox.yaml"
    with MosquittoBroker(tmp_path / "broker", users={"edge": "s3cr3t-pw"}) as broker:
        config.write_text(
            f"mqtt: {{url: '{broker.url}', device_id: dev, spool_path: '{tmp_path}/spool', "
            f"username: edge, password_file: '{password_file}'}}\n"
        )
        daemon = start_daemon(add_sub_repository, "--config", str(config))
        wait_for(lambda: "refused the login" in daemon.log(), what="the refused login")

        password_file.write_text("s3cr3t-pw\n")
        log = hang_up(daemon, 0)

        assert "settings reloaded: applied 'mqtt.password_file' (the file's contents)" in log
        wait_for(
            lambda: f"MQTT: connected to 127.0.0.1:{broker.port}" in daemon.log(),
            timeout_s=10,
            what="the login with the fixed password",
        )
        assert "s3cr3t" not in daemon.log()
