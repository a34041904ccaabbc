"""The three resolutions history is kept at, and the bounded ring each
series holds per tier.

| tier  | step        | points | spans |
|-------|-------------|--------|-------|
| 15m   | interval_s (5 s) | 180 | 15 min |
| 1h    | 20 s        | 180    | 1 h   |
| 24h   | 480 s (8 min) | 180  | 24 h  |

The finest step is the sampler's own pace (``history.interval_s``), so its
point count is 900 s / ``interval_s``. A point covers one step and is
stamped with the end of it; a tier's newest point is therefore at most one
step old (a 24 h chart lags up to 8 minutes, the 15 min one a few seconds).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

Value = TypeVar("Value")


@dataclass(frozen=True)
class Tier:
    name: str
    """As the API's ``range`` names it."""
    step_s: float
    span_s: float

    @property
    def capacity(self) -> int:
        return max(1, math.ceil(self.span_s / self.step_s))


COARSE_STEPS_S = {"1h": 20.0, "24h": 480.0}
PERSISTED = ("1h", "24h")
"""The tiers written to disk; the 15 min one starts empty after a restart."""


def tiers_for(interval_s: float) -> tuple[Tier, ...]:
    """The tiers, finest first, for a sampler pacing ``interval_s``."""
    return (
        Tier("15m", interval_s, 900.0),
        Tier("1h", COARSE_STEPS_S["1h"], 3600.0),
        Tier("24h", COARSE_STEPS_S["24h"], 86400.0),
    )


RANGES = ("15m", "1h", "24h")


@dataclass(frozen=True)
class Point(Generic[Value]):
    timestamp: float
    """Wall-clock seconds at the end of the step the point covers."""
    value: Value


class Ring(Generic[Value]):
    """A tier's points of one series, oldest first; the oldest is dropped
    when ``capacity`` is reached. Not locked: ``HistoryStore`` holds its
    lock around every use."""

    def __init__(self, capacity: int) -> None:
        self._points: collections.deque[Point[Value]] = collections.deque(maxlen=capacity)

    def append(self, timestamp: float, value: Value) -> None:
        self._points.append(Point(timestamp, value))

    def points(self, since: float = -math.inf) -> list[Point[Value]]:
        return [point for point in self._points if point.timestamp > since]

    @property
    def newest(self) -> float | None:
        return self._points[-1].timestamp if self._points else None

    def __len__(self) -> int:
        return len(self._points)
