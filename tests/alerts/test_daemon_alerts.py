"""The daemon judges alerts on their own thread from start to shutdown (a
model whose config cannot be read is alerted from the first load), and
builds none when ``alerts.enabled`` is false (edgebox/daemon.py)."""

from __future__ import annotations

import dataclasses
import threading

from telemetry.test_daemon_telemetry import local_settings

from daemon_process import wait_for
from edgebox.alerts.settings import AlertSettings
from edgebox.daemon import Daemon
from edgebox.telemetry.settings import TelemetrySettings


def alert_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "alerts"]


def test_alerts_are_judged_from_start_to_shutdown(tmp_path):
    settings = dataclasses.replace(
        local_settings(tmp_path, TelemetrySettings(source="psutil", interval_s=0.1)),
        alerts=AlertSettings(interval_s=0.2, memory=False),
    )
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.pbtxt").write_text("name: 'broken' {{{\n")
    daemon = Daemon(settings)
    assert daemon.alerts is not None and "mqtt_offline" not in daemon.alerts.rules
    runner = threading.Thread(target=daemon.run)
    runner.start()
    try:
        wait_for(
            lambda: "broken" in [a.subject for a in daemon.alerts.snapshot()],
            30,
            what="the model_unavailable alert",
        )
        assert alert_threads()
    finally:
        daemon.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    assert alert_threads() == []


def test_alerts_off_build_no_evaluator(tmp_path):
    settings = dataclasses.replace(
        local_settings(tmp_path, TelemetrySettings(source="psutil")),
        alerts=AlertSettings(enabled=False),
    )
    assert Daemon(settings).alerts is None
