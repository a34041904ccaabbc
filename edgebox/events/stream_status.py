"""A stream's state as operators and subscribers see it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.events.event import Event


class StreamState(enum.Enum):
    STARTING = "starting"
    """Opening the source; no frame yet."""
    RUNNING = "running"
    """Frames flow and the model answers (single frames may still fail; see
    ``inference_failures``)."""
    RECONNECTING = "reconnecting"
    """The source failed or ended; ``reason`` says why, ``next_retry_at`` when
    it is opened again."""
    MODEL_ERROR = "model_error"
    """Frames flow but the model cannot take them: unknown, not ready, or not
    a one-frame signature (``reason``). Rechecked with the next frame, at
    most ten times a second."""
    STOPPED = "stopped"
    """The daemon stopped the stream; its threads have ended."""


@dataclass(frozen=True)
class ResultLatency:
    """How long a stream's recent frames took from being read to their
    results being published (``StreamLatency.result_ms``): the distribution,
    not one frame's figure, since the tail is what a control loop feels."""

    count: int
    """Results the figures cover (the most recent, up to a bound)."""
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    buckets: tuple[tuple[float | None, int], ...]
    """``(upper bound in ms, results at most that and above the previous
    bound)``; the last bound is None (no upper bound)."""


@dataclass(frozen=True)
class StreamStatus(Event):
    """One stream at one moment. Published on the event bus whenever its
    state, reason or next retry changes, and returned by
    ``StreamManager.status()`` with live counters."""

    SCHEMA: ClassVar[str] = "edgebox.stream_status"

    name: str
    source: str
    """As configured, credentials masked (``edgebox.secrets_mask``): a URL's
    password, a pipeline's ``user-pw=`` and the like."""
    model: str
    state: StreamState
    reason: str
    next_retry_at: float | None
    """Wall-clock time of the next attempt to open the source, while reconnecting."""
    reconnect_attempt: int
    """Failed opens or reads in a row; 0 once frames flow again."""
    frames_captured: int
    frames_inferred: int
    frames_dropped: int
    """Dropped from the queue (oldest first) because the model was busy."""
    inference_failures: int
    """Frames that reached the model but produced no result."""
    reconnects: int
    """Times the source was reopened after failing (file rewinds not counted)."""
    fps: float
    """Results per second over the last few seconds."""
    model_version: str
    """The version that produced the latest result; "" before the first."""
    timestamp: float
    result_latency: ResultLatency | None = None
    """Read-to-result times of the recent results; None before the first."""

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        fields["fps"] = round(fields["fps"], 2)
        latency = fields["result_latency"]
        if latency is not None:
            for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms"):
                latency[key] = round(latency[key], 3)
            latency["buckets"] = [list(bucket) for bucket in latency["buckets"]]
        return fields
