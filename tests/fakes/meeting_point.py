"""A barrier python-backend models can meet at: two instances of one model
only get past it if they execute at the same time."""

from __future__ import annotations

import threading

barrier = threading.Barrier(2, timeout=10)
instances_seen: set[str] = set()


def reset() -> None:
    barrier.reset()
    instances_seen.clear()
