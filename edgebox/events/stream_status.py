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

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        fields["fps"] = round(fields["fps"], 2)
        return fields
