"""One configured stream: its two threads, the queue between them, and the
state both report into."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from edgebox.backoff import Backoff
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus, StreamState, StreamStatus
from edgebox.log_limiter import LogLimiter
from edgebox.secrets_mask import mask_secrets
from edgebox.streams.capture import CapturedFrame, CaptureLoop
from edgebox.streams.counters import StreamCounters
from edgebox.streams.frame_queue import FrameQueue
from edgebox.streams.frame_source import FrameSource
from edgebox.streams.health import HealthTracker, Signals, StreamHealthReport, Verdict
from edgebox.streams.inference import InferenceLoop
from edgebox.streams.latest_frames import LatestFrames
from edgebox.streams.settings import StreamSettings
from edgebox.streams.source_spec import SourceSpec, parse_source

log = logging.getLogger(__name__)

_QUIET_STATES = (StreamState.STARTING, StreamState.RUNNING, StreamState.STOPPED)


class Stream:
    """Built and driven by ``StreamManager`` on the daemon's main thread;
    ``status`` may be called from any thread.

    The state combines what each thread knows: the capture thread reports the
    source (starting, running, reconnecting), the inference thread the model
    (usable or not). A source problem outranks a model problem, since with no
    frames the model is never tried.
    """

    def __init__(
        self,
        config: StreamSettings,
        dataplane: DataPlane,
        bus: EventBus,
        *,
        open_source: Callable[[SourceSpec], FrameSource],
        backoff: Backoff,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        latest: LatestFrames | None = None,
    ) -> None:
        self.config = config
        self.spec = parse_source(config.source, config.decode)
        self._bus = bus
        self._wall_clock = wall_clock
        self._clock = clock
        self._health = HealthTracker()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._limiter = LogLimiter(config.log_interval_s, clock)
        self.counters = StreamCounters(clock)
        self.queue: FrameQueue[CapturedFrame] = FrameQueue(config.queue_frames)
        self._source_state = StreamState.STARTING
        self._source_reason = f"opening '{self.spec.display}'"
        self._next_retry_at: float | None = None
        self._attempt = 0
        self._model_problem: str | None = None
        self._stopped = False
        self._shown: tuple[StreamState, str, float | None] | None = None
        self._capture = CaptureLoop(
            config.name,
            self.spec,
            config.fps,
            self.queue,
            self.counters,
            self._stop,
            self._on_source,
            open_source=open_source,
            backoff=backoff,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._inference = InferenceLoop(
            config.name,
            config.model,
            dataplane,
            self.queue,
            self.counters,
            bus,
            self._on_model,
            self._limiter,
            self._stop,
            clock,
            latest,
            wall_clock,
        )
        self._threads = [
            threading.Thread(
                target=self._capture.run, name=f"stream-{config.name}-capture", daemon=True
            ),
            *(
                threading.Thread(
                    target=self._inference.run,
                    name=f"stream-{config.name}-infer-{n + 1}",
                    daemon=True,
                )
                for n in range(config.in_flight)
            ),
        ]

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        with self._lock:
            self._changed()
        for thread in self._threads:
            thread.start()

    def request_stop(self) -> None:
        """Ask the threads to end: the capture thread after its current read,
        each inference thread after its frame in flight; queued frames go."""
        self._stop.set()
        self.queue.close()

    def join(self, timeout_s: float) -> bool:
        """Wait for the threads up to ``timeout_s``; True if all ended (the
        source is then closed). Marks the stream stopped either way."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            log.warning(
                "stream '%s': %s still busy (a read from '%s' that does not return?); "
                "leaving it behind",
                self.name,
                ", ".join(stuck),
                self.spec.display,
            )
        with self._lock:
            self._stopped = True
            self._changed()
        return not stuck

    def status(self) -> StreamStatus:
        with self._lock:
            return self._status_locked(self._current())

    def health(self) -> StreamHealthReport:
        """Judged now, and at every state change (so the history has the
        reconnects and outages even when nobody is looking); a slowdown is
        noticed when someone reads, which the Streams page does every 2 s."""
        with self._lock:
            verdict = self._judge_locked(self._current())
            counters = self.counters
            return StreamHealthReport(
                name=self.name,
                health=verdict.health,
                reason=verdict.reason,
                fps_configured=self.config.fps or None,
                fps_achieved=counters.fps(),
                capture_fps=counters.captures.per_s(),
                dropped_recently=counters.drops.count(),
                window_s=counters.results.window_s,
                last_frame_at=counters.last_frame_at,
                changes=self._health.changes(),
            )

    def _judge_locked(self, shown: tuple[StreamState, str, float | None]) -> Verdict:
        state, reason, _ = shown
        counters = self.counters
        signals = Signals(
            state=state,
            reason=reason,
            attempt=self._attempt,
            fps_configured=self.config.fps or None,
            fps_achieved=counters.fps(),
            captured_recently=counters.captures.count(),
            dropped_recently=counters.drops.count(),
            window_s=counters.results.window_s,
        )
        return self._health.observe(signals, self._clock(), self._wall_clock())

    # -- reports from the threads ---------------------------------------------

    def _on_source(
        self, state: StreamState, reason: str, next_retry_at: float | None, attempt: int
    ) -> None:
        reason = mask_secrets(reason)  # OpenCV's and GStreamer's errors may quote the pipeline
        with self._lock:
            self._source_state = state
            self._source_reason = reason
            self._next_retry_at = next_retry_at
            self._attempt = attempt
            self._changed()

    def _on_model(self, problem: str | None) -> bool:
        if problem == self._model_problem:  # the common case, once per frame: no lock
            return False
        with self._lock:
            self._model_problem = problem
            return self._changed()

    def _current(self) -> tuple[StreamState, str, float | None]:
        if self._stopped:
            return StreamState.STOPPED, "", None
        if self._source_state is not StreamState.RUNNING:
            return self._source_state, self._source_reason, self._next_retry_at
        if self._model_problem is not None:
            return StreamState.MODEL_ERROR, self._model_problem, None
        return StreamState.RUNNING, "", None

    def _changed(self) -> bool:
        """Publish and log the state if it differs from the last shown; called
        with the lock held, so events leave in the order states were taken.
        True when the state or reason changed (a new retry time alone is
        published but not logged again)."""
        shown = self._current()
        if shown == self._shown:
            return False
        previous, self._shown = self._shown, shown
        self._judge_locked(shown)
        state, reason, _ = shown
        self._bus.publish(self._status_locked(shown))
        if previous is not None and previous[:2] == shown[:2]:
            held = self._limiter.allow("same-state")
            if held is not None:
                log.warning(
                    "stream '%s': still %s (attempt %d): %s",
                    self.name,
                    state.value,
                    self._attempt,
                    reason,
                )
            return False
        if previous is None:
            return True  # starting: StreamManager.start has logged the stream
        self._limiter.allow("same-state")  # a repeat is worth a line only an interval later
        if state is StreamState.STOPPED:
            counters = self.counters
            reason = (
                f"captured {counters.frames_captured}, inferred {counters.frames_inferred}, "
                f"dropped {self.queue.dropped}, failed {counters.inference_failures}, "
                f"reconnects {counters.reconnects}"
            )
            log.info("stream '%s': stopped (%s)", self.name, reason)
            return True
        level = logging.INFO if state in _QUIET_STATES else logging.WARNING
        log.log(level, "stream '%s': %s%s", self.name, state.value, f": {reason}" if reason else "")
        return True

    def _status_locked(self, shown: tuple[StreamState, str, float | None]) -> StreamStatus:
        state, reason, next_retry_at = shown
        counters = self.counters
        return StreamStatus(
            name=self.name,
            source=self.spec.display,
            model=self.config.model,
            state=state,
            reason=reason,
            next_retry_at=next_retry_at,
            reconnect_attempt=self._attempt,
            frames_captured=counters.frames_captured,
            frames_inferred=counters.frames_inferred,
            frames_dropped=self.queue.dropped,
            inference_failures=counters.inference_failures,
            reconnects=counters.reconnects,
            fps=counters.fps(),
            model_version=counters.model_version,
            timestamp=self._wall_clock(),
            result_latency=counters.result_latency.summary(),
        )
