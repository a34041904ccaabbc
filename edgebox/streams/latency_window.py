"""A stream's recent read-to-result times and their distribution, for the
stream's status (dashboard, MQTT status events). Bounded: the last
``KEEP`` results, whatever the frame rate, so the figures describe now,
and memory stays a few kilobytes a stream."""

from __future__ import annotations

import collections
import math
import threading

from edgebox.events import ResultLatency

KEEP = 512
"""About 30 s at 15 fps, 2 minutes at 4."""
BUCKET_BOUNDS_MS = (10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
"""Roughly logarithmic: a histogram that shows a 15 ms GPU path and a 600 ms
CPU one on the same axes."""


class LatencyWindow:
    """Written by the stream's publishing thread (one at a time, in frame
    order), read by status readers."""

    def __init__(self, keep: int = KEEP) -> None:
        self._values: collections.deque[float] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, ms: float) -> None:
        with self._lock:
            self._values.append(ms)

    def summary(self) -> ResultLatency | None:
        with self._lock:
            values = sorted(self._values)
        if not values:
            return None
        counts = [0] * (len(BUCKET_BOUNDS_MS) + 1)
        bound = 0
        for value in values:
            while bound < len(BUCKET_BOUNDS_MS) and value > BUCKET_BOUNDS_MS[bound]:
                bound += 1
            counts[bound] += 1
        bounds: list[float | None] = [*BUCKET_BOUNDS_MS, None]
        return ResultLatency(
            count=len(values),
            p50_ms=_nearest_rank(values, 50),
            p90_ms=_nearest_rank(values, 90),
            p99_ms=_nearest_rank(values, 99),
            max_ms=values[-1],
            buckets=tuple(zip(bounds, counts, strict=True)),
        )


def _nearest_rank(ordered: list[float], percent: float) -> float:
    """The smallest value with at least ``percent`` % of the values at or
    below it: always a value that was measured, never an interpolation."""
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]
