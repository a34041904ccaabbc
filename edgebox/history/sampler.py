"""The history thread: every ``interval_s`` it reads the dataplane's
statistics and the telemetry thread's recent samples, turns them into one
interval per series (``counters``) and hands that to the store; every
``persist_interval_s`` it writes the coarse tiers (``persistence``).

It reads only what already exists: ``DataPlane.statistics()`` takes each
version's snapshot under that version's own short lock, the same call the
statistics API and /metrics make, and the telemetry ring is copied under its
lock. Nothing is added to a request's path.

Readings more than ``MAX_GAP_INTERVALS`` intervals apart (the machine
slept, the clock was stepped) start over from a new baseline instead of
spreading what happened over a wrong duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from edgebox.dataplane_results import VersionStatistics
from edgebox.history import persistence
from edgebox.history.counters import CounterReading, IntervalCounts
from edgebox.history.device import DeviceMeans, device_columns
from edgebox.history.settings import HistorySettings
from edgebox.history.store import HistoryStore, SeriesKey
from edgebox.history.tiers import tiers_for
from edgebox.log_limiter import LogLimiter
from edgebox.telemetry.sample import TelemetrySample

log = logging.getLogger("edgebox.history")

MAX_GAP_INTERVALS = 3.0
FAILURE_LOG_INTERVAL_S = 60.0


class RecentTelemetry(Protocol):
    def history(self, seconds: float) -> Sequence[TelemetrySample]: ...


class HistorySampler:
    """Owns its store and its daemon thread ("history"). ``sample_once`` is
    the thread's step; tests call it directly with their own clock instead
    of starting the thread."""

    def __init__(
        self,
        statistics: Callable[[], Iterable[VersionStatistics]],
        telemetry: RecentTelemetry | None,
        settings: HistorySettings,
        path: Path | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``path``: the history file (None: nothing is written or read)."""
        self.settings = settings
        self.store = HistoryStore(tiers_for(settings.interval_s), settings.max_series)
        self.path = path
        self._statistics = statistics
        self._telemetry = telemetry
        self._clock = clock
        self._previous: dict[SeriesKey, CounterReading] = {}
        self._previous_at: float | None = None
        self._persisted_at: float | None = None
        self._limiter = LogLimiter(FAILURE_LOG_INTERVAL_S)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bytes_written = 0
        """Bytes written to ``path`` since start."""

    def load(self) -> bool:
        """Reads the history file back (before ``start``); False when there
        was none or it was ignored (logged)."""
        if self.path is None:
            return False
        now = self._clock()
        loaded = persistence.load(self.path, self.store, now)
        if loaded:
            log.info("history: restored the 1 h and 24 h tiers from %s", self.path)
        self._persisted_at = now
        return loaded

    def sample_once(self, now: float) -> bool:
        """One reading at wall-clock ``now``; True when it made an interval
        (the first reading, and the first after a gap, only set a baseline)."""
        try:
            readings = {
                (entry.name, entry.version): CounterReading.of(entry.counts)
                for entry in self._statistics()
            }
        except Exception as exc:
            self._report("statistics", exc)
            return False
        previous, previous_at = self._previous, self._previous_at
        self._previous, self._previous_at = readings, now
        gap = self.settings.interval_s * MAX_GAP_INTERVALS
        if previous_at is None or not 0 < now - previous_at <= gap:
            return False
        duration = now - previous_at
        intervals = {
            key: IntervalCounts.between(previous[key], reading, duration)
            for key, reading in readings.items()
            if key in previous
        }
        self.store.add_interval(previous_at, now, intervals, self._device(previous_at, now))
        return True

    def _device(self, start: float, end: float) -> DeviceMeans:
        means = DeviceMeans()
        if self._telemetry is None:
            return means
        try:
            samples = self._telemetry.history(end - start + self.settings.interval_s)
        except Exception as exc:
            self._report("telemetry", exc)
            return means
        for sample in samples:
            if start < sample.timestamp <= end:
                means.add(device_columns(sample))
        return means

    def persist(self, now: float) -> bool:
        """Writes the history file now; a failure is logged (at most once a
        minute) and the next cadence tries again."""
        if self.path is None:
            return False
        self._persisted_at = now
        try:
            self.bytes_written += persistence.save(self.path, self.store, now)
        except OSError as exc:
            self._report(f"writing {self.path}", exc)
            return False
        return True

    def persist_due(self, now: float) -> bool:
        return self._persisted_at is None or now - self._persisted_at >= (
            self.settings.persist_interval_s
        )

    def _report(self, what: str, exc: Exception) -> None:
        held = self._limiter.allow(what)
        if held is not None:
            log.warning(
                "history: %s failed: %s: %s%s",
                what,
                type(exc).__name__,
                exc,
                f" ({held} more since the last report)" if held else "",
            )

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("history: already started")
        self._thread = threading.Thread(target=self._run, name="history", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Ends the thread, then writes the file once more (a clean stop
        keeps the last minutes); False when the thread did not end in time
        (nothing is written then: the thread may still be writing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return False
        self.persist(self._clock())
        return True

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            now = self._clock()
            self.sample_once(now)
            if self.persist_due(now):
                self.persist(now)
            due = max(due + self.settings.interval_s, time.monotonic())
            self._stop.wait(max(0.0, due - time.monotonic()))
