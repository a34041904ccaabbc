"""A stream's inference threads: frames from the queue through the dataplane
to ``StreamResult`` events on the bus, in frame order, and summary lines in
the log."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.events import EventBus, StreamLatency, StreamResult
from edgebox.log_limiter import LogLimiter
from edgebox.streams.capture import CapturedFrame
from edgebox.streams.counters import StreamCounters
from edgebox.streams.frame_queue import FrameQueue
from edgebox.streams.in_order import InOrder
from edgebox.streams.latest_frames import LatestFrames
from edgebox.streams.model_input import FrameInput, ModelUnusable, bind_frame_input
from edgebox.summaries import SummaryError, summarize

log = logging.getLogger(__name__)

ReportModel = Callable[["str | None"], bool]
"""The model's side of the stream's state: the problem, or None when it
answers; returns True when that changed the state (which is then logged)."""

_NOT_SERVING = (ErrorCode.NOT_FOUND, ErrorCode.UNAVAILABLE)
UNUSABLE_RETRY_S = 0.1
"""Pause after a frame the model could not take at all, so a source read as
fast as the model goes does not spin a core on a model that is missing."""


class InferenceLoop:
    """``run`` is the body of each of the stream's inference threads (as many
    as frames may be in flight); it returns when the queue is closed, after
    the thread's frame in flight (if any) is done.

    With two frames in flight, frame k+1 is preprocessed while frame k is in
    the detector (each step of an ensemble has its own instances), so the
    python steps hide behind a fast GPU model instead of adding to it. Results
    are still published, counted and logged one at a time in the order the
    frames were taken.

    The model's current version runs each frame (``model_version`` ""), so a
    hot reload swaps under the stream and the result names the version that
    answered. Failures never end the loop: they are counted, reflected in the
    stream's state when the model is unusable, and logged at most once per
    ``log_interval_s``.
    """

    def __init__(
        self,
        name: str,
        model: str,
        dataplane: DataPlane,
        queue: FrameQueue[CapturedFrame],
        counters: StreamCounters,
        bus: EventBus,
        report: ReportModel,
        limiter: LogLimiter,
        stop: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        latest: LatestFrames | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._name = name
        self._model = model
        self._dataplane = dataplane
        self._queue = queue
        self._counters = counters
        self._bus = bus
        self._report = report
        self._limiter = limiter
        self._stop = stop
        self._clock = clock
        self._wall_clock = wall_clock
        self._latest = latest
        self._frame_input: FrameInput | None = None
        self._window = _Window()
        self._taking = threading.Lock()
        self._order = InOrder()

    def run(self) -> None:
        while True:
            with self._taking:
                frame = self._queue.get()
                if frame is None:
                    return
                ticket = self._order.take()
            try:
                outcome = self._infer(frame)
            except Exception as exc:
                log.exception("stream '%s': frame %d", self._name, frame.index)
                outcome = _Failure(f"unexpected error: {exc!r}", unusable=False)
            with self._order.turn(ticket):
                if isinstance(outcome, StreamResult):
                    outcome = self._publish(outcome, frame)
                    if self._latest is not None:
                        self._latest.put(frame.image, outcome)
                else:
                    self._fail(frame, outcome.reason, outcome.unusable)

    def _infer(self, frame: CapturedFrame) -> StreamResult | _Failure:
        dequeued = self._clock()
        try:
            frame_input = self._frame_input or bind_frame_input(self._dataplane, self._model)
        except ModelUnusable as exc:
            return _Failure(str(exc), unusable=True)
        self._frame_input = frame_input
        request = frame_input.request(frame.image)
        try:
            response = self._dataplane.infer(request)
        except EdgeboxError as exc:
            # The model may have changed under the stream (removed, or a new
            # version with other inputs): look it up again for the next frame.
            self._frame_input = None
            return _Failure(str(exc), unusable=exc.code in _NOT_SERVING)
        inferred = self._clock()
        try:
            outputs = summarize(response.outputs, frame_input.summary_rule)
        except SummaryError as exc:
            where = f"model '{response.model_name}' version {response.model_version}"
            return _Failure(f"{where}: {exc}", unusable=False)
        done = self._clock()
        capture_s = frame.capture_s
        latency = StreamLatency(
            capture_ms=capture_s * 1e3,
            queue_ms=(dequeued - frame.queued_at) * 1e3,
            inference_ms=(inferred - dequeued) * 1e3,
            total_ms=(capture_s + done - frame.queued_at) * 1e3,
        )
        height, width = frame.image.shape[:2]
        return StreamResult(
            stream=self._name,
            model=response.model_name or self._model,
            model_version=response.model_version,
            frame_index=frame.index,
            timestamp=frame.captured_at,
            frame_width=int(width),
            frame_height=int(height),
            latency=latency,
            outputs=outputs,
        )

    def _publish(self, result: StreamResult, frame: CapturedFrame) -> StreamResult:
        """Stamped here, in its turn, so the times include the wait for
        earlier frames: what a subscriber sees is when the result left."""
        result_ms = (self._clock() - frame.queued_at) * 1e3
        result = dataclasses.replace(
            result,
            latency=dataclasses.replace(result.latency, result_ms=result_ms),
            published_at=self._wall_clock(),
        )
        self._counters.record_result(result.model_version, result_ms)
        self._report(None)
        self._bus.publish(result)
        self._log_result(result)
        return result

    def _fail(self, frame: CapturedFrame, reason: str, unusable: bool) -> None:
        self._counters.inference_failures += 1
        self._window.failures += 1
        # A model that answers with an error is usable, so any model problem
        # the state still shows (e.g. "not ready") is over.
        logged_as_state = self._report(reason if unusable else None) and unusable
        held = self._limiter.allow("failure")
        if unusable:
            self._stop.wait(UNUSABLE_RETRY_S)
        if held is None or logged_as_state:
            return
        more = f" ({held} more since the last message)" if held else ""
        log.warning(
            "stream '%s': frame %d not inferred: %s%s", self._name, frame.index, reason, more
        )

    def _log_result(self, result: StreamResult) -> None:
        self._window.add(result.latency)
        if self._counters.frames_inferred == 1:
            self._limiter.allow("summary")
            self._window = _Window()
            log.info(
                "stream '%s': first result: model '%s' version %s, frame %d (%dx%d), %s, %.1f ms",
                self._name,
                result.model,
                result.model_version,
                result.frame_index,
                result.frame_width,
                result.frame_height,
                _describe_outputs(result.outputs),
                result.latency.total_ms,
            )
            return
        if self._limiter.allow("summary") is None:
            return
        window, self._window = self._window, _Window()
        log.info(
            "stream '%s': %.1f fps, frame %d: %s (model '%s' version %s); since the last "
            "line %d results, %d failed, mean ms capture %.1f queue %.1f inference %.1f total "
            "%.1f; since start %d dropped, %d failed",
            self._name,
            self._counters.fps(),
            result.frame_index,
            _describe_outputs(result.outputs),
            result.model,
            result.model_version,
            window.count,
            window.failures,
            *window.means_ms(),
            self._queue.dropped,
            self._counters.inference_failures,
        )


@dataclasses.dataclass(frozen=True)
class _Failure:
    reason: str
    unusable: bool


class _Window:
    """Latency sums since the last summary line."""

    def __init__(self) -> None:
        self.count = 0
        self.failures = 0
        self._sums = [0.0, 0.0, 0.0, 0.0]

    def add(self, latency: StreamLatency) -> None:
        self.count += 1
        for index, value in enumerate(
            (latency.capture_ms, latency.queue_ms, latency.inference_ms, latency.total_ms)
        ):
            self._sums[index] += value

    def means_ms(self) -> list[float]:
        return [total / max(self.count, 1) for total in self._sums]


def _describe_outputs(outputs: dict) -> str:
    if "lanes" in outputs:
        return f"{len(outputs['lanes'])} lane(s)"
    return "outputs " + ", ".join(f"'{name}'" for name in outputs) if outputs else "no outputs"
