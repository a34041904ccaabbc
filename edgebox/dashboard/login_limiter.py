"""Login attempts per client address, over a sliding minute."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0
MAX_CLIENTS = 4096
"""Addresses remembered at once; past it the one seen longest ago is forgotten,
so a flood of addresses costs bounded memory."""


@dataclass(frozen=True)
class Refusal:
    wait_s: float
    """Seconds until the client may try again."""
    report: bool
    """Whether to log this refusal: the first of a client, then at most one a
    minute, so a client hammering the login cannot flood the journal."""
    held: int
    """Refusals of this client not logged since the last one that was."""


@dataclass
class _Client:
    times: collections.deque[float] = field(default_factory=collections.deque)
    reported_at: float | None = None
    held: int = 0


class LoginLimiter:
    """Called from the dashboard's request threads; one lock."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: collections.OrderedDict[str, _Client] = collections.OrderedDict()

    def attempt(self, client: str) -> Refusal | None:
        """Counts an attempt from ``client``: None when it may go ahead, else
        the refusal (the attempt is not counted)."""
        now = self._clock()
        with self._lock:
            state = self._clients.pop(client, None) or _Client()
            times = state.times
            while times and now - times[0] >= WINDOW_S:
                times.popleft()
            self._clients[client] = state
            if len(self._clients) > MAX_CLIENTS:
                self._clients.popitem(last=False)
            if len(times) < self._per_minute:
                times.append(now)
                return None
            wait_s = WINDOW_S - (now - times[0])
            if state.reported_at is not None and now - state.reported_at < WINDOW_S:
                state.held += 1
                return Refusal(wait_s, report=False, held=state.held)
            held, state.held, state.reported_at = state.held, 0, now
            return Refusal(wait_s, report=True, held=held)
