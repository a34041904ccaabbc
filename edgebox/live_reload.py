"""A SIGHUP's settings applied to the running daemon: read again from the same
layers as at start, compared with what the daemon runs on
(``settings_reload.compare``), the live fields applied to their parts, and
one log line for what needs a restart and one for what was applied.

Runs on the daemon's main thread, between watchdog pings, never on a
request's path. Bad settings, or a part that fails to take its new values,
are logged and the daemon keeps running on what it has: nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from edgebox.dataplane import DataPlane
from edgebox.mqtt.bridge import build_router
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.settings import Settings, SettingsError
from edgebox.settings_reload import SettingsChange, compare, restart_warning
from edgebox.telemetry.sampler import Telemetry

log = logging.getLogger("edgebox")


class _Described(Protocol):
    def describe(self) -> str: ...


class _Streams(Protocol):
    """The stream manager as a reload uses it; only the daemon builds and
    runs streams (``tests/streams/test_streams_layering.py``)."""

    def apply(self, streams: Sequence[Any], timeout_s: float) -> _Described: ...


class LiveParts(Protocol):
    """The running parts a reload applies settings to (the ``Daemon`` has
    them, under these names)."""

    dataplane: DataPlane
    streams: _Streams
    mqtt: MqttForwarder | None
    telemetry: Telemetry


def reload_settings(
    current: Settings, reread: Callable[[], Settings], parts: LiveParts
) -> Settings | None:
    """What the daemon runs on after the reload (the live fields' new values,
    the others' old ones); None when nothing was applied."""
    try:
        try:
            new = reread()
        except SettingsError as exc:
            problems = _problem_lines(exc)
            if len(problems) == 1:
                log.error("settings reload: %s; keeping the current settings", problems[0])
            else:
                log.error(
                    "settings reload: %d problems; keeping the current settings", len(problems)
                )
                for problem in problems:
                    log.error("settings reload: %s", problem)
            return None
        change = compare(current, new)
        if change.restart:
            log.warning("%s", restart_warning(change.restart))
        applied = _apply(change, current, parts)
        log.info(
            "settings reloaded: %s",
            f"applied {', '.join(applied)}" if applied else "nothing applied",
        )
        return change.applied
    except Exception:
        log.exception("settings reload failed; keeping what was already applied")
        return None


def _apply(change: SettingsChange, current: Settings, parts: LiveParts) -> list[str]:
    """Each live field of ``change`` applied to its part; the names (and
    what a stream change did) for the summary line."""
    new = change.applied
    live = set(change.live)
    applied: list[str] = []
    if "log_verbose" in live:
        parts.dataplane.update_log_settings({"log_verbose_level": new.log_verbose})
        applied.append("'log_verbose'")
    if "exit_timeout_secs" in live:
        applied.append("'exit_timeout_secs'")
    if "streams" in live:
        done = parts.streams.apply(new.streams, current.exit_timeout_secs / 2)
        described = done.describe()
        applied.append(f"'streams' ({described})" if described else "'streams'")
    mqtt_fields = [name for name in change.live if name.startswith("mqtt.")]
    if parts.mqtt is not None and new.mqtt is not None:
        files = parts.mqtt.reconfigure(new.mqtt, build_router(new.mqtt, new.streams))
        applied += [f"'{name}'" for name in mqtt_fields]
        applied += [
            f"'mqtt.{name}' (the file's contents)"
            for name in files
            if f"mqtt.{name}" not in mqtt_fields
        ]
    telemetry_fields = [name for name in change.live if name.startswith("telemetry.")]
    if telemetry_fields:
        section = new.telemetry
        parts.telemetry.retime(
            section.interval_s,
            section.history_s,
            section.mqtt_interval_s if new.mqtt is not None else 0.0,
        )
        applied += [f"'{name}'" for name in telemetry_fields]
    return applied


def _problem_lines(error: SettingsError) -> list[str]:
    """Each problem of ``error`` as ``edgebox serve`` prints it (with the file
    and line first when it has them)."""
    lines = [
        problem.located() if hasattr(problem, "located") else str(problem)
        for problem in getattr(error, "problems", ())
    ]
    return lines or str(error).splitlines() or [type(error).__name__]
