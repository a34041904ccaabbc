"""How often something happened lately (results, captured frames, drops),
from the times it happened, so a stream's fps is what it does now and not an
average since it started."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

WINDOW_S = 5.0
MAX_EVENTS = 1024
"""Times kept: a stream above ``MAX_EVENTS / WINDOW_S`` events a second is
measured over the span the kept times cover instead of the whole window."""


class RecentRate:
    """One writer thread calls ``record``; any thread reads. Memory is
    bounded by ``max_events`` whatever the rate."""

    def __init__(
        self,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        max_events: int = MAX_EVENTS,
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._started_at = clock()
        self._times: collections.deque[float] = collections.deque(maxlen=max_events)
        self._lock = threading.Lock()

    def record(self) -> None:
        now = self._clock()
        with self._lock:
            self._times.append(now)

    def count(self) -> int:
        """Events within the last ``window_s``."""
        return len(self._recent(self._clock()))

    def per_s(self) -> float:
        """Events a second over the last ``window_s``: over the time since
        construction while that is shorter (a young stream is not averaged
        with seconds it did not exist), over the kept times' span when the
        cap cut the window short; 0.0 once events stop for a window."""
        now = self._clock()
        recent = self._recent(now)
        if not recent:
            return 0.0
        if len(recent) == self._times.maxlen:
            span = now - recent[0]
        else:
            span = min(self.window_s, now - self._started_at)
        return len(recent) / span if span > 0 else 0.0

    def _recent(self, now: float) -> list[float]:
        with self._lock:
            times = list(self._times)
        return [t for t in times if t > now - self.window_s]
