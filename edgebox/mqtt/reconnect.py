"""When the MQTT thread may try the broker again.

Capped exponential backoff with jitter, so a fleet whose broker comes back
does not reconnect in one burst; capped lower for a while after the link was
up, since a broker restart or a network blip is short; and slow after a
refused login, which a person has to fix.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from edgebox.backoff import Backoff

RECONNECT = Backoff(initial_s=1.0, max_s=60.0)
RECONNECT_AFTER_UP = Backoff(initial_s=1.0, max_s=4.0)
"""Within ``RECENTLY_UP_S`` of the link being up: the 60 s backoff kept
devices away 15-18 s after their broker was back."""
RECENTLY_UP_S = 300.0
RELOGIN = Backoff(initial_s=30.0, max_s=600.0)
"""After a refused login: credentials are fixed by a person, not by retrying."""


class ReconnectSchedule:
    """Used on the MQTT thread only."""

    def __init__(
        self,
        backoff: Backoff = RECONNECT,
        refused_backoff: Backoff = RELOGIN,
        backoff_after_up: Backoff = RECONNECT_AFTER_UP,
        recently_up_s: float = RECENTLY_UP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.refused_backoff = refused_backoff
        self._backoff = backoff
        self._backoff_after_up = backoff_after_up
        self._recently_up_s = recently_up_s
        self._clock = clock
        self.attempt = 0
        """Failed attempts since the link was last up."""
        self.next_at = 0.0
        self._last_up = float("-inf")

    def up(self) -> None:
        """The link is up (at its CONNACK), or was until now (when lost)."""
        self.attempt = 0
        self._last_up = self._clock()

    def lost(self) -> None:
        self._last_up = self._clock()

    def now(self) -> None:
        """Try at once (new settings), with the backoff started over."""
        self.attempt = 0
        self.next_at = 0.0

    def failed(self, refused: bool) -> None:
        """An attempt failed: the next one waits."""
        policy = self.refused_backoff if refused else self._backoff
        if not refused and self._clock() - self._last_up <= self._recently_up_s:
            policy = self._backoff_after_up
        delay = policy.delay_s(self.attempt) * (0.5 + 0.5 * random.random())
        self.attempt += 1
        self.next_at = self._clock() + delay

    def due(self) -> bool:
        return self._clock() >= self.next_at

    def wait_s(self, most_s: float) -> float:
        """Until the next attempt, at most ``most_s``."""
        return min(most_s, max(0.0, self.next_at - self._clock()))
