"""How long to wait before retrying something that failed: a stream reopening
its source, an isolated python model restarting its process."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Exponential and capped: a camera unplugged (or a model crashing) for a minute is retried
    every ``max_s`` rather than hammered, and one that blips is back quickly.
    Tests pass tiny values instead of waiting seconds."""

    initial_s: float = 0.5
    max_s: float = 10.0
    factor: float = 2.0

    def delay_s(self, attempt: int) -> float:
        """Wait before retry number ``attempt`` (0 for the first retry)."""
        return min(self.max_s, self.initial_s * self.factor ** min(attempt, 64))
