"""The Scheduler base every scheduling strategy derives from.

A scheduler takes a request with the sink its responses go to
(``edgebox/responses.py``): ``submit`` never raises for the request's failure,
it sends the error as the final response. For the models edgebox serves today
that is exactly one final send per request, made by the scheduler from what the
instance's ``execute`` returned. ``infer`` is that unary case, waited for.
"""

from __future__ import annotations

import abc

from edgebox.errors import EdgeboxError
from edgebox.responses import ResponseSink, UnaryResponse
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.tensors import InferRequest, InferResponse


class Scheduler(abc.ABC):
    statistics: ModelStatistics
    failure: str | None
    """None while the scheduler serves; once it cannot (a dynamic batcher's
    worker died), why, and every request fails UNAVAILABLE with it. The
    registry then reports the version UNAVAILABLE with this reason."""
    _where: str
    decoupled: bool = False
    """True for a decoupled model's scheduler: zero or many responses per request."""

    @abc.abstractmethod
    def submit(self, request: InferRequest, sink: ResponseSink) -> None:
        """Run one validated request; its responses, then its final, go to
        ``sink`` (an error as the final, CANCELLED for a request whose client
        gave up before it ran; never another request's failure).

        Safe to call from many threads at once. Which thread sends, and
        whether before ``submit`` returns, is each scheduler's to say.
        """

    def infer(self, request: InferRequest) -> InferResponse:
        """The unary case: ``submit`` with a ``UnaryResponse``, waited for on
        the caller's thread. Returns the response or raises the EdgeboxError
        the request failed with. A scheduler may answer it more cheaply, but
        never differently."""
        sink = UnaryResponse(self._where)
        self.submit(request, sink)
        return sink.result()

    @abc.abstractmethod
    def close(self) -> None:
        """Release instances. Called once, after the last request's final send."""


class SynchronousScheduler(Scheduler):
    """A scheduler that runs each request to its one answer on the caller's
    thread (direct, ensemble) implements ``infer``; ``submit`` sends that
    answer as the final before returning. So unary calls, the hot path, pay
    for no sink at all."""

    def submit(self, request: InferRequest, sink: ResponseSink) -> None:
        try:
            response = self.infer(request)
        except EdgeboxError as exc:
            sink.send(exc, True)
            return
        sink.send(response, True)

    @abc.abstractmethod
    def infer(self, request: InferRequest) -> InferResponse:
        """Run the request on this thread; its response, or raise its
        EdgeboxError. Safe to call from many threads at once."""
