"""What the dynamic and sequence batchers share: one worker thread per
instance that forms a batch, runs it and sends each request its one final.

A batch whose run raises, ``BaseException``s included, fails its requests
that have no result yet, and the worker goes on: a dead worker would leave
every later request waiting. Should a worker itself die (nothing a model does
gets that far), the batcher stops serving: ``failure`` says why, and every
waiting and later request fails UNAVAILABLE with it, which takes the version
out of service until it is reloaded.

How a batch is formed, run and completed is each batcher's own; so is which
lock guards its queue. Finals are sent by ``_send``, once per request, and a
sink that raises is logged, never allowed to kill the worker.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections.abc import Sequence

from edgebox.errors import EdgeboxError, Unavailable, one_line
from edgebox.responses import Outcome, ResponseSink
from edgebox.scheduling.scheduler import Scheduler
from edgebox.tensors import InferRequest

log = logging.getLogger(__name__)


class QueuedRequest:
    """One request from ``submit`` until its final is sent. ``result`` is set
    by the worker that decides it; ``sink`` is None once the final was sent,
    so none is sent twice. Each batcher's own kind adds its fields and sets
    all of them in its ``__init__``."""

    __slots__ = ("enqueued_ns", "request", "result", "sink")

    request: InferRequest
    sink: ResponseSink | None
    enqueued_ns: int
    result: Outcome


Batch = Sequence["QueuedRequest | None"]
"""A formed batch; None entries are padding rows with no request (the
sequence batcher's ``direct`` strategy)."""


class BatchWorkers(Scheduler):
    """A scheduler whose batches run on worker threads, one per lane (an
    instance, with whatever the batcher keeps for it)."""

    _kind = ""
    """Put before "batch" and "batcher" in log lines and ``failure``."""
    failure: str | None = None
    """Why the batcher stopped serving (a worker died); None while it serves."""

    def _start_workers(self, lanes: Sequence[object], thread_name: str) -> None:
        self._workers = [
            threading.Thread(target=self._work, args=(lane,), name=thread_name, daemon=True)
            for lane in lanes
        ]
        for worker in self._workers:
            worker.start()

    def _join_workers(self) -> None:
        for worker in self._workers:
            worker.join()

    @abc.abstractmethod
    def _form(self, lane) -> tuple[Batch | None, int]:
        """The lane's next batch and its place in formation order (for a
        batcher that completes batches in order), or (None, 0) once the
        batcher closed and the lane has nothing left. Blocks until then."""

    @abc.abstractmethod
    def _run(self, lane, batch: Batch) -> None:
        """Execute the batch and leave each request its response or error in
        ``result``; may raise, which fails the requests left without one."""

    @abc.abstractmethod
    def _complete(self, batch: Batch, place: int) -> None:
        """Send the batch's finals (``_send``) once its run is over."""

    @abc.abstractmethod
    def _take_waiting(self) -> list[QueuedRequest]:
        """Every request still queued, removed from the queue: the batcher
        stopped serving and fails them."""

    def _worker_done(self, lane) -> None:
        """The lane's worker is about to end, the batcher closed and drained."""

    def _work(self, lane) -> None:
        batch: Batch | None = []
        try:
            while True:
                batch, place = self._form(lane)
                if batch is None:
                    self._worker_done(lane)
                    return
                try:
                    self._run(lane, batch)
                except BaseException as exc:
                    self._fail_batch(batch, exc)
                self._complete(batch, place)
        except BaseException as exc:
            self._stop_serving(exc, [p for p in batch if p is not None and p.sink is not None])

    def _fail_batch(self, batch: Batch, exc: BaseException) -> None:
        """Called in the ``except`` clause, so the log line has the traceback."""
        log.exception("%s: %sbatch failed", self._where, self._kind)
        error = EdgeboxError(f"{self._where}: batch failed: {one_line(exc)}")
        now = time.perf_counter_ns()
        for pending in batch:
            if pending is not None and pending.result is None:
                pending.result = error
                self.statistics.record_request(False, now - pending.enqueued_ns)

    def _stop_serving(self, exc: BaseException, stranded: list[QueuedRequest]) -> None:
        """A worker died: fail its batch, what waits and everything after it, loudly."""
        self.failure = f"{self._where}: a {self._kind}batcher worker stopped: {one_line(exc)}"
        log.critical("%s; reload the model to serve it again", self.failure, exc_info=exc)
        stranded += self._take_waiting()
        for pending in stranded:
            pending.result = Unavailable(self.failure)
            self.statistics.record_request(False, time.perf_counter_ns() - pending.enqueued_ns)
            self._send(pending)

    def _send(self, pending: QueuedRequest) -> None:
        """Send the request its final ``result``, once. A sink that raises (a
        contract bug) is logged: the worker must live on."""
        sink, pending.sink = pending.sink, None
        if sink is None:
            return
        try:
            sink.send(pending.result, True)
        except Exception:
            log.exception(
                "%s: the response sink of request '%s' failed", self._where, pending.request.id
            )
