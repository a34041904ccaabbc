"""The daemon samples telemetry from start to shutdown, as ``daemon.telemetry``
(what the dashboard and /metrics read)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from daemon_process import wait_for
from edgebox.daemon import Daemon
from edgebox.settings import Settings
from edgebox.telemetry.settings import TelemetrySettings


def local_settings(repository: Path, telemetry: TelemetrySettings) -> Settings:
    """Every port the daemon opens picked free, on 127.0.0.1."""
    fields = {f.name for f in dataclasses.fields(Settings)}
    extra: dict = {}
    if "metrics_port" in fields:
        extra["metrics_port"] = 0
    if "dashboard" in fields:
        extra["dashboard"] = dataclasses.replace(
            Settings().dashboard, port=0, session_key_path=repository / "session.key"
        )
    if "state_directory" in fields:
        extra["state_directory"] = repository / "state"
    return Settings(
        model_repository=repository,
        host="127.0.0.1",
        http_port=0,
        grpc_port=0,
        telemetry=telemetry,
        **extra,
    )


def test_telemetry_runs_from_start_to_shutdown(tmp_path):
    settings = local_settings(
        tmp_path, TelemetrySettings(source="psutil", interval_s=0.1, history_s=10)
    )
    daemon = Daemon(settings)
    assert daemon.telemetry.source_name == "psutil"
    assert daemon.telemetry.device.memory_total_bytes > 0
    assert daemon.telemetry.latest() is None
    runner = threading.Thread(target=daemon.run)
    runner.start()
    try:
        wait_for(lambda: len(daemon.telemetry.history()) >= 2, what="two telemetry samples")
    finally:
        daemon.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    assert not daemon.telemetry.running
    assert daemon.telemetry.latest().source == "psutil"
