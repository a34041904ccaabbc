"""The Scheduler protocol every scheduling strategy implements."""

from __future__ import annotations

from typing import Protocol

from edgebox.scheduling.statistics import ModelStatistics
from edgebox.tensors import InferRequest, InferResponse


class Scheduler(Protocol):
    statistics: ModelStatistics
    failure: str | None
    """None while the scheduler serves; once it cannot (a dynamic batcher's
    worker died), why, and every ``infer`` fails UNAVAILABLE with it. The
    registry then reports the version UNAVAILABLE with this reason."""

    def infer(self, request: InferRequest) -> InferResponse:
        """Run one validated request to completion on the calling thread.

        Raises EdgeboxError for a failed request (CANCELLED for one whose
        client gave up before it ran); never for another request's failure.
        Safe to call from many threads at once.
        """

    def close(self) -> None:
        """Release instances. Called once, after the last ``infer`` returned."""
