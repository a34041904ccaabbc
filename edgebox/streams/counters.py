"""A stream's running counts, each written by one thread and read by any."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from edgebox.streams.latency_window import LatencyWindow
from edgebox.streams.recent_rate import WINDOW_S, RecentRate

FPS_WINDOW_S = WINDOW_S


class StreamCounters:
    """The capture thread writes ``frames_captured``, ``reconnects``, the
    capture and drop rates and ``last_frame_at``; the inference thread the
    rest. Readers may see a count one frame behind."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.frames_captured = 0
        self.reconnects = 0
        self.frames_inferred = 0
        self.inference_failures = 0
        self.model_version = ""
        self.results = RecentRate(FPS_WINDOW_S, clock)
        self.captures = RecentRate(FPS_WINDOW_S, clock)
        self.drops = RecentRate(FPS_WINDOW_S, clock)
        """Frames the queue dropped because the model was busy."""
        self.result_latency = LatencyWindow()
        """Read-to-result times of the recent results."""
        self.last_frame_at: float | None = None
        """Wall-clock time the source last delivered a frame; None before the first."""
        self._lock = threading.Lock()

    def record_result(self, model_version: str, result_ms: float) -> None:
        with self._lock:
            self.frames_inferred += 1
            self.model_version = model_version
            self.results.record()
        self.result_latency.add(result_ms)

    def record_capture(self, captured_at: float, dropped_one: bool) -> None:
        """A frame from the source (``captured_at`` wall clock), and whether
        queueing it pushed out an older one."""
        self.captures.record()
        if dropped_one:
            self.drops.record()
        self.last_frame_at = captured_at

    def fps(self) -> float:
        """Results per second over the last ``FPS_WINDOW_S`` (or since start,
        if younger); falls to 0 when results stop."""
        return self.results.per_s()
