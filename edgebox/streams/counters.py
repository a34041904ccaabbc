"""A stream's running counts, each written by one thread and read by any."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

FPS_WINDOW_S = 5.0
_MAX_TIMES = 1024


class StreamCounters:
    """The capture thread writes ``frames_captured`` and ``reconnects``; the
    inference thread the rest. Readers may see a count one frame behind."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started_at = clock()
        self.frames_captured = 0
        self.reconnects = 0
        self.frames_inferred = 0
        self.inference_failures = 0
        self.model_version = ""
        self._result_times: collections.deque[float] = collections.deque(maxlen=_MAX_TIMES)
        self._lock = threading.Lock()

    def record_result(self, model_version: str) -> None:
        now = self._clock()
        with self._lock:
            self.frames_inferred += 1
            self.model_version = model_version
            self._result_times.append(now)

    def fps(self) -> float:
        """Results per second over the last ``FPS_WINDOW_S`` (or since start,
        if younger); falls to 0 when results stop."""
        now = self._clock()
        with self._lock:
            times = list(self._result_times)
        recent = [t for t in times if t > now - FPS_WINDOW_S]
        if not recent:
            return 0.0
        if len(recent) == _MAX_TIMES:
            span = now - recent[0]
        else:
            span = min(FPS_WINDOW_S, now - self._started_at)
        return len(recent) / span if span > 0 else 0.0
