"""The event a stream publishes for every inferred frame.

MQTT publishing and the dashboard's live view subscribe to ``StreamResult``
on the event bus; ``as_dict`` is the JSON they send, so it stays small: the
model's outputs summarised by the model's rule (see ``summaries/``), never the frame or raw
tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class StreamLatency:
    """Where one frame's time went, in milliseconds."""

    capture_ms: float
    """Waiting for the frame and decoding it (not the fps cap's pacing)."""
    queue_ms: float
    """Waiting between capture and inference, behind the frame being inferred."""
    inference_ms: float
    """``DataPlane.infer``: the whole model, ensemble steps included."""
    total_ms: float
    """From the start of the capture to the result, summary included."""
    result_ms: float = 0.0
    """From the frame being read from the source (decoded) to its result
    being published, waits for earlier frames included: the part of
    glass-to-result edgebox owns. What comes before the read (exposure,
    encoding, network, the decoder's buffer) is the camera's and the
    network's; bench/glass_to_result.py measures the whole."""


@dataclass(frozen=True)
class StreamResult(Event):
    """Published by a stream's inference thread for every frame that got a result."""

    SCHEMA: ClassVar[str] = "edgebox.stream_result"

    stream: str
    model: str
    model_version: str
    """The version that answered; changes under a running stream on hot reload."""
    frame_index: int
    """Counts every frame the stream captured since it started, across
    reconnects and file rewinds; gaps are frames dropped or not inferred."""
    timestamp: float
    """Wall-clock time (seconds since the epoch) the frame was captured."""
    frame_width: int
    frame_height: int
    latency: StreamLatency
    outputs: dict[str, Any]
    """JSON-able summary of the outputs; treat as read-only."""
    published_at: float = 0.0
    """Wall-clock time the result was published; with ``timestamp``, a
    subscriber on another machine (clocks in NTP sync) has the frame's whole
    way from capture to its own receipt."""

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        fields["latency"] = {k: round(v, 3) for k, v in fields["latency"].items()}
        return fields
