"""A stream's health as an operator reads it at a glance (the Streams page's
badge): healthy, degraded, reconnecting or down, with the reason and a short
history of changes. Judged from the stream's state and its recent rates,
never from totals since it started."""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass
from typing import Any

from edgebox.events import StreamState

SLOW_FPS_RATIO = 0.5
"""Achieved below this share of the configured fps is degraded."""
DROP_RATIO = 0.1
"""A share of the recent frames dropped at or above this is degraded."""
MIN_DROPS = 2
"""Fewer recent drops than this never degrade a stream (one is jitter)."""
DOWN_AFTER_ATTEMPTS = 3
"""Failed opens or reads in a row after which reconnecting is down."""
MAX_CHANGES = 20
"""Health changes kept per stream, oldest dropped first."""


class Health(enum.Enum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    """Frames flow, but fewer than configured reach results, or drops rise."""
    RECONNECTING = "reconnecting"
    """Opening the source, or retrying it after a failure."""
    DOWN = "down"
    """No results: stopped, the model cannot take frames, the source failed
    ``DOWN_AFTER_ATTEMPTS`` times in a row, or no frame came for a window."""


@dataclass(frozen=True)
class Signals:
    """What health is judged from, taken at one moment."""

    state: StreamState
    reason: str
    attempt: int
    fps_configured: float | None
    """None: no cap configured, so no rate to fall short of."""
    fps_achieved: float
    captured_recently: int
    dropped_recently: int
    window_s: float


@dataclass(frozen=True)
class Verdict:
    health: Health
    reason: str


@dataclass(frozen=True)
class HealthChange:
    at: float
    """Wall-clock seconds since the epoch."""
    health: Health
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "health": self.health.value, "reason": self.reason}


def judge(signals: Signals, settled: bool) -> Verdict:
    """``settled``: the stream has been running a whole window, so its rates
    are not still climbing from a (re)start and may count against it."""
    state = signals.state
    if state is StreamState.STOPPED:
        return Verdict(Health.DOWN, "stopped")
    if state is StreamState.MODEL_ERROR:
        return Verdict(Health.DOWN, signals.reason)
    if state is StreamState.STARTING:
        return Verdict(Health.RECONNECTING, signals.reason)
    if state is StreamState.RECONNECTING:
        if signals.attempt >= DOWN_AFTER_ATTEMPTS:
            failed = f"the source failed {signals.attempt} times in a row"
            return Verdict(Health.DOWN, f"{failed}: {signals.reason}")
        return Verdict(Health.RECONNECTING, signals.reason)
    if not settled:
        return Verdict(Health.HEALTHY, "")
    window = f"the last {signals.window_s:g} s"
    if signals.captured_recently == 0:
        return Verdict(Health.DOWN, f"no frame from the source in {window}")
    configured = signals.fps_configured
    if configured and signals.fps_achieved < configured * SLOW_FPS_RATIO:
        return Verdict(
            Health.DEGRADED,
            f"{signals.fps_achieved:.1f} fps of the {configured:g} configured",
        )
    dropped, captured = signals.dropped_recently, signals.captured_recently
    if dropped >= MIN_DROPS and dropped >= captured * DROP_RATIO:
        return Verdict(
            Health.DEGRADED,
            f"{dropped} of {captured} frames dropped in {window} "
            "(the model is slower than the source)",
        )
    return Verdict(Health.HEALTHY, "")


class HealthTracker:
    """One per stream; its owner calls ``observe`` under its own lock (the
    stream's), from whichever thread reads or changes the stream."""

    def __init__(self, max_changes: int = MAX_CHANGES) -> None:
        self._changes: collections.deque[HealthChange] = collections.deque(maxlen=max_changes)
        self._running_since: float | None = None
        self._current: Verdict | None = None

    def observe(self, signals: Signals, now: float, wall_now: float) -> Verdict:
        """The health now (``now`` monotonic, ``wall_now`` for the history);
        a change of health (not of reason alone) is added to the history."""
        if signals.state is StreamState.RUNNING:
            if self._running_since is None:
                self._running_since = now
        else:
            self._running_since = None
        settled = self._running_since is not None and now - self._running_since >= signals.window_s
        verdict = judge(signals, settled)
        if self._current is None or verdict.health is not self._current.health:
            self._changes.append(HealthChange(wall_now, verdict.health, verdict.reason))
        self._current = verdict
        return verdict

    def changes(self) -> tuple[HealthChange, ...]:
        """Oldest first."""
        return tuple(self._changes)


@dataclass(frozen=True)
class StreamHealthReport:
    """A stream's health and the rates it was judged from, for the dashboard."""

    name: str
    health: Health
    reason: str
    fps_configured: float | None
    fps_achieved: float
    """Results a second over the last ``window_s``."""
    capture_fps: float
    """Frames from the source a second over the last ``window_s``."""
    dropped_recently: int
    window_s: float
    last_frame_at: float | None
    """Wall clock of the source's latest frame; None before the first."""
    changes: tuple[HealthChange, ...]

    def as_dict(self, wall_now: float) -> dict[str, Any]:
        """``last_frame_age_s`` against ``wall_now`` (the server's clock, so
        a browser's wrong clock cannot make "2 s ago" lie)."""
        age = wall_now - self.last_frame_at if self.last_frame_at is not None else None
        return {
            "health": self.health.value,
            "reason": self.reason,
            "fps_configured": self.fps_configured,
            "fps_achieved": round(self.fps_achieved, 2),
            "capture_fps": round(self.capture_fps, 2),
            "dropped_recently": self.dropped_recently,
            "window_s": self.window_s,
            "last_frame_at": self.last_frame_at,
            "last_frame_age_s": round(max(0.0, age), 1) if age is not None else None,
            "changes": [change.as_dict() for change in reversed(self.changes)],
        }
