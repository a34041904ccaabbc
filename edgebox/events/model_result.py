"""The results of one HTTP or gRPC request, for a model that opted in to MQTT."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class ModelResult(Event):
    """Published after a request to a model whose ``config.pbtxt`` sets the
    ``mqtt_publish`` parameter, from the thread that answered it; the bus never
    blocks it, so a slow broker cannot slow the request."""

    SCHEMA: ClassVar[str] = "edgebox.model_result"

    model: str
    model_version: str
    """The version that answered."""
    request_id: str
    """The request's ``id``; "" when the client sent none."""
    timestamp: float
    """Wall-clock time (seconds since the epoch) the result was produced."""
    outputs: dict[str, Any]
    """JSON-able outputs, large tensors summarised; treat as read-only."""
