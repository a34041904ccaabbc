"""SIGHUP in process: the daemon re-reads its settings through the callable
the CLI hands it, applies what can change live, names what waits for a
restart, and keeps serving on the old settings when the new ones are bad."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from daemon_process import wait_for
from edgebox.daemon import Daemon
from edgebox.dashboard.settings import DashboardSettings
from edgebox.events import StreamState
from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.streams.settings import StreamSettings
from model_fixtures import add_add_sub


def local_settings(tmp_path: Path, **overrides) -> Settings:
    """Loopback, free ports, the dashboard's session key in the test's folder."""
    dashboard = DashboardSettings(port=0, session_key_path=tmp_path / "session.key")
    return Settings(
        **{
            "model_repository": tmp_path,
            "host": "127.0.0.1",
            "http_port": 0,
            "grpc_port": 0,
            "metrics_port": 0,
            "dashboard": dashboard,
            "state_directory": tmp_path / "state",
            **overrides,
        }
    )


class RunningDaemon:
    """``Daemon.run`` on a thread, re-reading whatever ``next_settings`` holds."""

    def __init__(self, settings: Settings) -> None:
        self.next_settings: Settings | Exception | Callable[[], Settings] = settings
        self.daemon = Daemon(settings, reread=self._reread)
        self.reloads = 0
        self._thread = threading.Thread(target=self.daemon.run, name="daemon-under-test")

    def _reread(self) -> Settings:
        self.reloads += 1
        if isinstance(self.next_settings, Exception):
            raise self.next_settings
        if callable(self.next_settings):
            return self.next_settings()
        return self.next_settings

    def start(self) -> RunningDaemon:
        self._thread.start()
        wait_for(self.daemon.dataplane.ready, 30, what="the daemon to be ready")
        return self

    def reload(self, settings: Settings | Exception | Callable[[], Settings]) -> None:
        """What the SIGHUP handler does, then wait until the main thread re-read."""
        self.next_settings = settings
        before = self.reloads
        self.daemon.request_reload()
        wait_for(lambda: self.reloads > before, 10, what="the settings to be re-read")
        wait_for(lambda: not self.daemon.reload_pending, 10, what="the reload to finish")

    def stop(self) -> None:
        self.daemon.request_stop()
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.fixture
def running(tmp_path: Path):
    started: list[RunningDaemon] = []

    def start(**overrides) -> RunningDaemon:
        add_add_sub(tmp_path)
        daemon = RunningDaemon(local_settings(tmp_path, **overrides)).start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()
    logging.getLogger("edgebox").setLevel(logging.NOTSET)


def road(name: str, **fields) -> StreamSettings:
    return StreamSettings(name=name, source="synthetic:road", model="add_sub", **fields)


def test_reload_changes_the_log_level_live(running, caplog):
    caplog.set_level(logging.INFO)
    box = running(log_verbose=0)
    assert not logging.getLogger("edgebox").isEnabledFor(logging.DEBUG)

    box.reload(replace(box.daemon.settings, log_verbose=1))

    assert logging.getLogger("edgebox").isEnabledFor(logging.DEBUG)
    assert box.daemon.dataplane.log_settings()["log_verbose_level"] == 1
    assert "settings reloaded: applied 'log_verbose'" in caplog.text
    box.daemon.dataplane.update_log_settings({"log_verbose_level": 0})


def test_reload_starts_added_streams_stops_removed_ones_and_leaves_the_others(running, caplog):
    caplog.set_level(logging.INFO)
    box = running(streams=(road("kept"), road("gone")))
    streams = box.daemon.streams
    wait_for(lambda: streams.stream("kept").counters.frames_captured > 0, what="frames")
    kept = streams.stream("kept")
    gone = streams.stream("gone")

    settings = box.daemon.settings
    box.reload(replace(settings, streams=(road("kept"), road("added"))))

    assert streams.stream("kept") is kept
    assert kept.status().state is not StreamState.STOPPED
    assert gone.status().state is StreamState.STOPPED
    assert streams.stream("gone") is None
    assert [s.name for s in streams.status()] == ["kept", "added"]
    wait_for(lambda: streams.stream("added").counters.frames_captured > 0, what="the added stream")
    assert "settings reloaded: applied 'streams' (started 'added'; stopped 'gone')" in caplog.text


def test_reload_restarts_a_changed_stream(running, caplog):
    caplog.set_level(logging.INFO)
    box = running(streams=(road("cam", fps=15.0),))
    before = box.daemon.streams.stream("cam")

    settings = box.daemon.settings
    box.reload(replace(settings, streams=(road("cam", fps=5.0),)))

    after = box.daemon.streams.stream("cam")
    assert after is not before and after.config.fps == 5.0
    assert before.status().state is StreamState.STOPPED
    assert "settings reloaded: applied 'streams' (restarted 'cam')" in caplog.text


def test_reload_names_settings_that_need_a_restart_and_keeps_their_values(running, caplog):
    caplog.set_level(logging.INFO)
    box = running()
    port = box.daemon.http.port
    settings = box.daemon.settings

    box.reload(replace(settings, http_port=port + 1, grpc_port=1, log_verbose=0))

    assert (
        "settings 'http_port', 'grpc_port' changed; they take effect after a restart" in caplog.text
    )
    assert box.daemon.settings.http_port == 0
    assert box.daemon.http.port == port
    assert "settings reloaded: nothing applied" in caplog.text


def test_reload_with_bad_settings_logs_the_problem_and_keeps_serving(running, caplog):
    caplog.set_level(logging.INFO)
    box = running(log_verbose=0)
    before = box.daemon.settings

    box.reload(SettingsError("setting 'http_port' from /etc/edgebox/edgebox.yaml: expected int"))

    assert (
        "settings reload: setting 'http_port' from /etc/edgebox/edgebox.yaml: expected int; "
        "keeping the current settings"
    ) in caplog.text
    assert box.daemon.settings is before
    assert box.daemon.healthy()
    assert box.daemon.dataplane.ready()


def test_reload_without_a_configuration_to_reread_changes_nothing(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    add_add_sub(tmp_path)
    daemon = Daemon(local_settings(tmp_path))

    assert daemon.reload() is False
    assert "SIGHUP: these settings were not read from a configuration; nothing to reload" in (
        caplog.text
    )


def test_reload_retimes_telemetry_live(running, caplog):
    caplog.set_level(logging.INFO)
    box = running()
    settings = box.daemon.settings
    telemetry = replace(settings.telemetry, interval_s=0.5, history_s=60.0)

    box.reload(replace(settings, telemetry=telemetry))

    assert box.daemon.telemetry.interval_s == 0.5
    assert box.daemon.telemetry.history_s == 60.0
    assert "settings reloaded: applied 'telemetry.interval_s', 'telemetry.history_s'" in caplog.text


def test_reload_with_several_problems_logs_each_one_with_its_line(running, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    box = running()
    config = tmp_path / "edgebox.yaml"
    config.write_text("mqtt:\n  qso: 1\ntelemetry:\n  interval_s: 0\n")

    box.reload(lambda: load_settings({}, config_file=config, environ={}))

    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("settings reload")]
    assert lines == [
        "settings reload: 2 problems; keeping the current settings",
        f"settings reload: {config}:2: setting 'mqtt': unknown key 'qso'; did you mean 'qos'?",
        f"settings reload: {config}:4: setting 'telemetry.interval_s': expected 0.1..60 seconds, "
        "got 0.0",
    ]
    assert box.daemon.dataplane.ready()
