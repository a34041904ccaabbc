"""The scheduler of a decoupled model (``model_transaction_policy { decoupled:
true }``): the model answers each request through its response sender, zero,
one or many responses, then a final, possibly long after ``execute`` returned.

``submit`` runs the request on the caller's thread on the first free instance
(``execute_decoupled``) and returns once the model's ``execute`` did; the
instance then serves the next request while a thread the model started may
still be sending. Each response is put into client shapes and checked against
the config (``finish_response``) before it reaches the caller's sink, and the
request's statistics are recorded at its final. As in Triton 2.51, an error
response the model sent (``EdgeboxError.answered_by_model``) leaves the request
a success; an ``execute`` that failed the request before it returned counts one
execution but no inference.

Unary inference cannot carry a decoupled model's answers: ``infer`` raises
``DecoupledUnary`` and each transport answers it with Triton's own text.
``dynamic_batching`` is not applied: each request runs alone.

A model that never sends a request's final holds the request, as under
Triton. A retiring version waits ``unload_grace_s`` for its finals, then
``abandon`` fails the held requests (UNAVAILABLE), so an unload or a shutdown
never waits for ever and no sink is left open.
"""

from __future__ import annotations

import logging
import threading
import time

from edgebox.errors import EdgeboxError, Unavailable, one_line
from edgebox.responses import DecoupledUnary, Outcome, ResponseContractError, ResponseSink
from edgebox.scheduling.direct import answered, cancelled_error, finish_response
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.scheduler import Scheduler
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse

log = logging.getLogger(__name__)


class DecoupledScheduler(Scheduler):
    decoupled = True
    failure: str | None = None
    unload_grace_s: float = 10.0
    """How long a retiring version waits for held requests' finals before
    ``abandon`` fails them."""

    def __init__(self, pool: InstancePool, signature: ModelSignature, where: str) -> None:
        self.statistics = ModelStatistics()
        self._pool = pool
        self._signature = signature
        self._where = where
        self._lock = threading.Lock()
        self._open: dict[int, _Tracked] = {}
        self._closed = False

    def infer(self, request: InferRequest) -> InferResponse:
        raise DecoupledUnary(
            f"{self._where}: a decoupled model answers through a stream (gRPC "
            "ModelStreamInfer, HTTP generate_stream), not unary infer"
        )

    def submit(self, request: InferRequest, sink: ResponseSink) -> None:
        clock = time.perf_counter_ns
        start = clock()
        if self._closed:
            sink.send(Unavailable(f"{self._where}: the model is being unloaded"), True)
            return
        instance = self._pool.acquire()
        try:
            acquired = clock()
            if request.cancelled():
                self.statistics.record_request(False, acquired - start)
                sink.send(cancelled_error(self._where), True)
                return
            tracked = _Tracked(self, request, sink, start, acquired)
            with self._lock:
                self._open[id(tracked)] = tracked
            try:
                model_request = self._signature.to_model_shapes(request)
                with self._pool.running(instance):
                    instance.execute_decoupled([model_request], [tracked])
            except BaseException as exc:
                log.exception("%s: execute raised", self._where)
                tracked.fail(EdgeboxError(f"{self._where}: backend failed: {one_line(exc)}"))
            executed = clock()
        finally:
            self._pool.release(instance)
        ran = not (tracked.done and tracked.failed)
        self.statistics.record_execution(
            1, int(ran), 0, executed - acquired, 0, inferences=int(ran)
        )

    def abandon(self, reason: str) -> int:
        """Fail every request still waiting for its final (UNAVAILABLE with
        ``reason``); how many there were."""
        with self._lock:
            held = list(self._open.values())
        for tracked in held:
            tracked.fail(
                Unavailable(
                    f"{self._where}: {reason} before the model sent the request's final response"
                )
            )
        return len(held)

    def close(self) -> None:
        """Close the instances (``finalize``), then fail what is still open."""
        self._closed = True
        self._pool.close()
        self.abandon("the model was unloaded")

    def _finished(self, tracked: _Tracked, ok: bool) -> None:
        with self._lock:
            self._open.pop(id(tracked), None)
        now = time.perf_counter_ns()
        self.statistics.record_request(ok, now - tracked.start, tracked.acquired - tracked.start)


class _Tracked:
    """The sink the model's sender writes to: client shapes, the contract
    (nothing after the final), statistics, then the caller's sink."""

    __slots__ = ("_lock", "_scheduler", "_sink", "acquired", "done", "failed", "request", "start")

    def __init__(
        self,
        scheduler: DecoupledScheduler,
        request: InferRequest,
        sink: ResponseSink,
        start: int,
        acquired: int,
    ) -> None:
        self._scheduler = scheduler
        self._sink = sink
        self._lock = threading.Lock()
        self.request = request
        self.start = start
        self.acquired = acquired
        self.done = False
        self.failed = False

    def send(self, response: Outcome, final: bool) -> None:
        scheduler = self._scheduler
        if isinstance(response, InferResponse):
            try:
                response = finish_response(
                    response, self.request, scheduler._signature, scheduler._where
                )
            except EdgeboxError as exc:
                response = exc
        with self._lock:
            if self.done:
                raise ResponseContractError(
                    f"{scheduler._where}: a response was sent after the final one"
                )
            self.done = final
        if not answered(response):
            self.failed = True
        try:
            self._sink.send(response, final)
        finally:
            if final:
                scheduler._finished(self, not self.failed)

    def fail(self, error: EdgeboxError) -> None:
        """The final error, unless the final was already sent."""
        with self._lock:
            if self.done:
                return
            self.done = True
        self.failed = True
        try:
            self._sink.send(error, True)
        except Exception:
            log.exception("%s: a response sink refused the final error", self._scheduler._where)
        finally:
            self._scheduler._finished(self, False)
