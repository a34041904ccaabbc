"""Login attempts per client address, over a sliding minute."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

WINDOW_S = 60.0
MAX_CLIENTS = 4096
"""Addresses remembered at once; past it the one seen longest ago is forgotten,
so a flood of addresses costs bounded memory."""


class LoginLimiter:
    """Called from the dashboard's request threads; one lock."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._attempts: collections.OrderedDict[str, collections.deque[float]] = (
            collections.OrderedDict()
        )

    def attempt(self, client: str) -> float | None:
        """Counts an attempt from ``client``: None when it may go ahead, else
        the seconds until it may try again (the attempt is not counted)."""
        now = self._clock()
        with self._lock:
            times = self._attempts.pop(client, None) or collections.deque()
            while times and now - times[0] >= WINDOW_S:
                times.popleft()
            self._attempts[client] = times
            if len(self._attempts) > MAX_CLIENTS:
                self._attempts.popitem(last=False)
            if len(times) >= self._per_minute:
                return WINDOW_S - (now - times[0])
            times.append(now)
            return None
