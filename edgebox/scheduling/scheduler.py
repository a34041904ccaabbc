"""The Scheduler protocol every scheduling strategy implements."""

from __future__ import annotations

from typing import Protocol

from edgebox.scheduling.statistics import ModelStatistics
from edgebox.tensors import InferRequest, InferResponse


class Scheduler(Protocol):
    statistics: ModelStatistics

    def infer(self, request: InferRequest) -> InferResponse:
        """Run one validated request to completion on the calling thread.

        Raises EdgeboxError for a failed request; never for another request's
        failure. Safe to call from many threads at once.
        """

    def close(self) -> None:
        """Release instances. Called once, after the last ``infer`` returned."""
