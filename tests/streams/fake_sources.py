"""Frame sources standing in for cameras in capture tests."""

from __future__ import annotations

import numpy as np

from edgebox.backoff import Backoff

FAST_BACKOFF = Backoff(initial_s=0.01, max_s=0.04, factor=2.0)
"""Retries 10, 20, 40, 40... ms apart, so reconnect tests take milliseconds."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeLiveCamera:
    """A camera running at ``camera_fps`` on a fake clock: each grab waits for
    (advances the clock to) the next frame; frame k is grey level k % 256."""

    def __init__(self, clock: FakeClock, camera_fps: float, frames: int) -> None:
        self.clock = clock
        self.interval_s = 1.0 / camera_fps
        self.frames = frames
        self.grabbed: list[int] = []
        self.retrieved: list[int] = []
        self.closed = False

    def grab(self) -> bool:
        if len(self.grabbed) >= self.frames:
            return False
        self.clock.now += self.interval_s
        self.grabbed.append(len(self.grabbed))
        return True

    def retrieve(self) -> np.ndarray | None:
        index = self.grabbed[-1]
        self.retrieved.append(index)
        return np.full((4, 4, 3), index % 256, dtype=np.uint8)

    def close(self) -> None:
        self.closed = True


class ClosingSpy:
    """Wraps a real source and records that it was closed."""

    def __init__(self, source) -> None:
        self.source = source
        self.closed = False

    def grab(self) -> bool:
        return self.source.grab()

    def retrieve(self):
        return self.source.retrieve()

    def close(self) -> None:
        self.closed = True
        self.source.close()
