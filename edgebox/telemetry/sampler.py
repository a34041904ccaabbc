"""The telemetry thread: reads the source every ``interval_s`` into a bounded
ring the dashboard and metrics read, feeds the thermal guard, and puts a
snapshot on the bus every ``mqtt_interval_s`` for MQTT.

Nothing here runs on a request path: readers take a copy under a short lock.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

from edgebox.events import Event, EventBus, TelemetrySnapshot
from edgebox.log_limiter import LogLimiter
from edgebox.telemetry.sample import DeviceInfo, TelemetrySample
from edgebox.telemetry.source import TelemetrySource
from edgebox.telemetry.thermal_guard import ThermalGuard

log = logging.getLogger("edgebox.telemetry")

FAILURE_LOG_INTERVAL_S = 60.0


def snapshot_of(sample: TelemetrySample) -> TelemetrySnapshot:
    """The MQTT form of ``sample``: the same fields, nested ones as mappings."""
    return TelemetrySnapshot(**sample.as_dict())


class Telemetry:
    """Owns its source and its daemon thread ("telemetry"). ``latest``,
    ``history`` and ``device`` may be called from any thread; the ring holds
    ``history_s / interval_s`` samples and drops the oldest when full. A read
    that raises is logged (once a minute at most, with how many were held
    back), counted in ``read_failures`` and skipped."""

    def __init__(
        self,
        source: TelemetrySource,
        interval_s: float = 1.0,
        history_s: float = 900,
        bus: EventBus | None = None,
        thermal: ThermalGuard | None = None,
        mqtt_interval_s: float = 0.0,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"telemetry: expected interval_s > 0, got {interval_s}")
        if not history_s >= interval_s:
            raise ValueError(
                f"telemetry: expected history_s >= interval_s ({interval_s}), got {history_s}"
            )
        self._source = source
        self.interval_s = interval_s
        self.history_s = history_s
        self._bus = bus
        self._thermal = thermal
        self._mqtt_interval_s = mqtt_interval_s
        self._device = source.device_info()
        self._ring: collections.deque[TelemetrySample] = collections.deque(
            maxlen=max(1, round(history_s / interval_s))
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by ``stop`` and ``retime``: the thread's wait ends early."""
        self._thread: threading.Thread | None = None
        self._limiter = LogLimiter(FAILURE_LOG_INTERVAL_S)
        self._failing = False
        self._last_snapshot_at: float | None = None
        self.read_failures = 0
        """Reads that raised since start (each one skipped)."""

    @property
    def device(self) -> DeviceInfo:
        return self._device

    @property
    def source_name(self) -> str:
        return self._source.name

    @property
    def thermal(self) -> ThermalGuard | None:
        return self._thermal

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def latest(self) -> TelemetrySample | None:
        """The newest sample; None before the first."""
        with self._lock:
            return self._ring[-1] if self._ring else None

    def history(self, seconds: float | None = None) -> list[TelemetrySample]:
        """The samples of the last ``seconds`` up to the newest one (every
        sample kept when None), oldest first; a copy."""
        with self._lock:
            samples = list(self._ring)
        if seconds is None or not samples:
            return samples
        since = samples[-1].timestamp - seconds
        return [sample for sample in samples if sample.timestamp >= since]

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("telemetry: already started")
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Ends the thread (a read in progress finishes first) and closes the
        source; False when the thread is still in a read after ``timeout_s``."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        stopped = not self.running
        if stopped:
            self._source.close()
        return stopped

    def retime(self, interval_s: float, history_s: float, mqtt_interval_s: float) -> None:
        """New intervals from a settings reload (the daemon's main thread,
        values already checked by the settings): the next sample comes
        ``interval_s`` after the last one, the ring keeps its newest samples
        up to ``history_s / interval_s``."""
        if not interval_s > 0 or not history_s >= interval_s:
            raise ValueError(
                f"telemetry: expected 0 < interval_s <= history_s, got {interval_s}, {history_s}"
            )
        with self._lock:
            self._ring = collections.deque(self._ring, maxlen=max(1, round(history_s / interval_s)))
            self.interval_s = interval_s
            self.history_s = history_s
            self._mqtt_interval_s = mqtt_interval_s
        self._wake.set()

    def _run(self) -> None:
        due = time.monotonic()
        while True:
            self.sample_once()
            read_end = time.monotonic()
            sampled_due = due
            while True:
                if self._stop.is_set():
                    return
                # After a read slower than the interval the next one is due at
                # once, not a burst to catch up. ``retime`` wakes the wait.
                due = max(sampled_due + self.interval_s, read_end)
                now = time.monotonic()
                if now >= due:
                    break
                self._wake.wait(due - now)
                self._wake.clear()

    def sample_once(self) -> TelemetrySample | None:
        """One step of the thread: read, keep, guard, publish. Called by the
        thread alone once started (tests call it directly instead)."""
        try:
            sample = self._source.read()
        except Exception as exc:
            self.read_failures += 1
            self._failing = True
            held = self._limiter.allow("read")
            if held is not None:
                log.warning(
                    "telemetry: %s read failed: %s: %s%s",
                    self._source.name,
                    type(exc).__name__,
                    exc,
                    f" ({held} more since the last report)" if held else "",
                )
            return None
        if self._failing:
            self._failing = False
            log.info("telemetry: %s reads again", self._source.name)
        with self._lock:
            self._ring.append(sample)
        events: list[Event] = list(self._thermal.feed(sample)) if self._thermal else []
        if self._mqtt_interval_s > 0 and (
            self._last_snapshot_at is None
            or sample.timestamp - self._last_snapshot_at >= self._mqtt_interval_s
        ):
            self._last_snapshot_at = sample.timestamp
            events.append(snapshot_of(sample))
        if self._bus is not None:
            for event in events:
                self._bus.publish(event)
        return sample
