"""Rate limits for log lines that could otherwise repeat once per frame or per
retry: a stream's failures, an MQTT link that keeps dropping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LogLimiter:
    """At most one line per key every ``interval_s``; what was held back is
    counted, so the next line that goes out can say how many it stands for.
    Thread-safe; a stream's two threads share one."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None to stay quiet, or the number of lines held back since the
        last one for ``key`` (0 for the first)."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._interval_s:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)
