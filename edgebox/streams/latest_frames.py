"""Each stream's latest inferred frame and its result, kept for the dashboard.

Written by a stream's inference threads, in the order results are published;
read by any thread (the dashboard's request threads). ``put`` stores
references under a lock and copies nothing, so the stream pays a dict
assignment per frame; whoever reads must treat the frame as read-only (the
capture thread makes a new array for every frame, so nothing writes it again).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from edgebox.events import StreamResult


class LatestFrame(NamedTuple):
    image: np.ndarray
    """The BGR frame the model was given; read-only."""
    result: StreamResult


class LatestFrames:
    """One slot per stream, replaced with every result; holds one frame per
    stream (the last), never more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, LatestFrame] = {}

    def put(self, image: np.ndarray, result: StreamResult) -> None:
        with self._lock:
            self._slots[result.stream] = LatestFrame(image, result)

    def get(self, stream: str) -> LatestFrame | None:
        """The stream's latest frame and result; None before its first result."""
        with self._lock:
            return self._slots.get(stream)

    def drop(self, stream: str) -> None:
        """Forget a stream that no longer exists (removed by a settings reload)."""
        with self._lock:
            self._slots.pop(stream, None)
