"""The events page's memory: the last events from the bus, numbered, so a
page polling with ``after=<id>`` gets each one once."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

from edgebox.events import OCCURRENCES, EventBus, ModelStateChanged

MAX_EVENTS = 500
KEPT = OCCURRENCES
"""Results and telemetry snapshots are data, not events: MQTT, the streams
page and the telemetry charts carry them. Subscribing to these kinds only
keeps every result (thousands a second) off this ring's queue and thread."""


class EventRing:
    """Subscribes at construction (so events published before ``start`` are
    kept, up to the subscription's bound) and is filled by its own thread
    (``dashboard-events``) from ``start`` until ``stop``; read by the request
    threads. Past ``max_events`` the oldest is forgotten."""

    def __init__(
        self, bus: EventBus, max_events: int = MAX_EVENTS, clock: Callable[[], float] = time.time
    ) -> None:
        self._subscription = bus.subscribe(*KEPT, max_events=1000)
        self._clock = clock
        self._lock = threading.Lock()
        self._events: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_events)
        self._last_id = 0
        self._last_errors: dict[str, str] = {}
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dashboard-events", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Leaves the bus; the thread ends at once."""
        self._subscription.close()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while (event := self._subscription.get()) is not None:
            self.add(event)

    def add(self, event: Any) -> None:
        """Numbers and keeps ``event`` (results are left out); called by the
        ring's thread."""
        if not isinstance(event, KEPT):
            return
        entry = event.as_dict()
        with self._lock:
            self._last_id += 1
            self._events.append({"id": self._last_id, "time": self._clock(), **entry})
            failed = isinstance(event, ModelStateChanged) and event.state == "UNAVAILABLE"
            if failed and event.reason:
                self._last_errors[event.model] = event.reason

    def after(self, after_id: int) -> tuple[list[dict[str, Any]], int]:
        """The kept events numbered above ``after_id``, oldest first, and the
        last number given so far."""
        with self._lock:
            return [e for e in self._events if e["id"] > after_id], self._last_id

    def last_error(self, model: str) -> str | None:
        """The latest UNAVAILABLE reason seen for ``model`` since the start."""
        with self._lock:
            return self._last_errors.get(model)
