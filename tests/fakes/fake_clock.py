"""A clock that moves only when a test says so: ``FakeClock()`` is callable
(monotonic seconds) and ``wall`` gives wall-clock seconds that move with it."""

from __future__ import annotations

WALL_START = 1_700_000_000.0


class FakeClock:
    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self._start = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now

    def wall(self) -> float:
        return WALL_START + (self.now - self._start)
