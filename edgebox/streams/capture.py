"""A stream's capture thread: open the source, take frames at the fps cap,
hand them to the queue, and reopen the source when it fails or ends."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgebox.backoff import Backoff
from edgebox.events import StreamState
from edgebox.secrets_mask import MaskSecrets
from edgebox.streams.counters import StreamCounters
from edgebox.streams.frame_queue import FrameQueue
from edgebox.streams.frame_source import FrameSource, SourceError
from edgebox.streams.source_spec import SourceKind, SourceSpec

log = logging.getLogger(__name__)
log.addFilter(MaskSecrets())  # a traceback from opening a source may quote its pipeline

ReportSource = Callable[[StreamState, str, "float | None", int], None]
"""(state, reason, next_retry_at, attempt): the source's side of the stream's state."""


@dataclass(frozen=True)
class CapturedFrame:
    index: int
    image: np.ndarray
    captured_at: float
    """Wall clock, for the result's timestamp."""
    capture_s: float
    """Waiting for the frame plus decoding it."""
    queued_at: float
    """Monotonic, to time the wait in the queue."""


class CaptureLoop:
    """``run`` is the capture thread's body; it returns once ``stop`` is set
    and the current read (if any) has returned, with the source closed.

    Pacing: a file or synthetic source is read when the next frame is due
    (1 / fps after the last). A live source is grabbed at its own pace, and
    only the frames the cap keeps are decoded, so neither the driver's nor
    FFmpeg's buffer fills with stale frames. With no cap (fps 0), a file or
    synthetic source waits for room in the queue instead: its frames do not
    go stale, so every one is inferred, as fast as the model goes.
    """

    def __init__(
        self,
        name: str,
        spec: SourceSpec,
        fps: float,
        queue: FrameQueue[CapturedFrame],
        counters: StreamCounters,
        stop: threading.Event,
        report: ReportSource,
        *,
        open_source: Callable[[SourceSpec], FrameSource],
        backoff: Backoff,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._name = name
        self._spec = spec
        self._period_s = 1.0 / fps if fps > 0 else 0.0
        self._queue = queue
        self._counters = counters
        self._stop = stop
        self._report = report
        self._open_source = open_source
        self._backoff = backoff
        self._clock = clock
        self._wall_clock = wall_clock

    def run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                source = self._open_source(self._spec)
            except SourceError as exc:
                attempt = self._wait_to_retry(str(exc), attempt)
                continue
            except Exception as exc:
                log.exception("stream '%s': opening '%s' failed", self._name, self._spec.display)
                attempt = self._wait_to_retry(f"opening failed: {exc!r}", attempt)
                continue
            try:
                frames, problem = self._read_frames(source)
            except Exception as exc:
                log.exception("stream '%s': reading '%s' failed", self._name, self._spec.display)
                frames, problem = 0, f"reading failed: {exc!r}"
            finally:
                source.close()
            if self._stop.is_set():
                return
            if frames:
                attempt = 0
            if problem is None and frames and self._spec.kind is SourceKind.FILE:
                log.debug(
                    "stream '%s': end of '%s'; reopening from the start",
                    self._name,
                    self._spec.display,
                )
                continue
            attempt = self._wait_to_retry(problem or self._ended_reason(frames), attempt)

    def _ended_reason(self, frames: int) -> str:
        if self._spec.kind is SourceKind.FILE:
            return f"video file '{self._spec.display}' ended before its first frame"
        return (
            f"'{self._spec.display}' stopped delivering frames (ended, unplugged or timed out) "
            f"after {frames} frame(s)"
        )

    def _wait_to_retry(self, reason: str, attempt: int) -> int:
        delay_s = self._backoff.delay_s(attempt)
        self._counters.reconnects += 1
        self._report(StreamState.RECONNECTING, reason, self._wall_clock() + delay_s, attempt + 1)
        self._stop.wait(delay_s)
        return attempt + 1

    def _read_frames(self, source: FrameSource) -> tuple[int, str | None]:
        """Frames read from this opening, and why reading stopped: None when
        the source ended (or stop was asked), else the problem."""
        period_s = self._period_s
        early_s = period_s / 4
        live = self._spec.live
        wait_for_room = not live and not period_s
        next_due: float | None = None
        frames = 0
        while not self._stop.is_set():
            if wait_for_room and not self._queue.wait_for_room():
                break
            if period_s and not live and next_due is not None:
                wait_s = next_due - self._clock()
                if wait_s > 0 and self._stop.wait(wait_s):
                    break
            started = self._clock()
            if not source.grab():
                return frames, None
            if period_s and live and next_due is not None and self._clock() < next_due - early_s:
                continue
            image = source.retrieve()
            if image is None:
                return frames, f"'{self._spec.display}' delivered a frame that could not be decoded"
            done = self._clock()
            if period_s:
                next_due = done + period_s if next_due is None else max(next_due + period_s, done)
            if frames == 0:
                self._report(StreamState.RUNNING, "", None, 0)
            frames += 1
            index = self._counters.frames_captured
            self._counters.frames_captured += 1
            captured = CapturedFrame(index, image, self._wall_clock(), done - started, done)
            self._counters.record_capture(captured.captured_at, self._queue.put(captured))
        return frames, None
