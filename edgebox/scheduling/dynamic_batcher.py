"""Triton's dynamic batcher: requests to a model with ``dynamic_batching`` wait
in one bounded queue and leave it in batches.

Each instance has a worker thread that takes the oldest request and the
requests behind it that can share its batch: same datatypes and the same shape
apart from the batch dimension (requests that differ along a variable dimension
are never merged), up to ``max_batch_size`` items. It dispatches at once when
the batch reaches the largest ``preferred_batch_size`` (or ``max_batch_size``),
and otherwise waits for more until the oldest request has waited
``max_queue_delay_microseconds``. With no delay configured it takes whatever is
queued: under load, requests gather while the instances are busy.

The queue is bounded (``default_queue_policy.max_queue_size``, or
``DEFAULT_MAX_QUEUE_SIZE`` when the config sets none): a request that finds it
full is rejected at once with a clear error rather than growing memory. With
``timeout_action: REJECT`` a request that waited longer than its timeout is
failed; ``DELAY`` keeps it. With ``priority_levels`` the queue is one per
level, each with its own policy, and batches are formed from the most urgent
requests first (``priority_queues.py``). ``preserve_ordering`` makes batches
complete in the order they were formed, as Triton does.

``submit`` queues the request and returns; the worker that ran the batch sends
each request its one final response (``infer`` waits for it). A request whose
client gave up (``InferRequest.is_cancelled``) is dropped, answered CANCELLED,
when it would join a batch; like a timed-out one it counts as failed.
Whatever ``execute`` raises, ``BaseException``s included, fails that batch's
requests and the worker goes on. As in Triton 2.51, a request the model
answered with an error counts as a success, and a failed execute counts one
execution (and its batch size) but no inference, one failure per request.
Should a worker itself die (nothing a model does gets that far), the batcher
stops: every waiting and later request fails UNAVAILABLE with the reason, kept
in ``failure``, which takes the version out of service until it is reloaded.
Finals for requests answered from the queue (timed out, cancelled) are sent
under the queue lock: sinks must be quick.

The instance's ``execute`` gets the batch as a list of requests, as Triton's
backends do: the python backend passes the list to ``model.py``, ONNX Runtime
concatenates it into one run.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#dynamic-batcher
"""

from __future__ import annotations

import threading
import time

from edgebox.backends.base import Instance
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable
from edgebox.responses import Outcome, ResponseSink
from edgebox.scheduling.batch_workers import BatchWorkers, QueuedRequest
from edgebox.scheduling.direct import answered, cancelled_error, execute_all, finish_response
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.priority_queues import PriorityQueues
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest


class _Pending(QueuedRequest):
    """One request waiting for its batch, and what batching it needs: its
    batch size and the key of the requests it may share a batch with."""

    __slots__ = ("batch", "deadline_ns", "key", "level")

    def __init__(
        self,
        request: InferRequest,
        sink: ResponseSink,
        enqueued_ns: int,
        deadline_ns: int | None,
        level: int,
    ) -> None:
        self.request = request
        self.sink: ResponseSink | None = sink
        self.batch = request.inputs[0].data.shape[0] if request.inputs else 1
        self.key = tuple(sorted((t.name, t.datatype, t.data.shape[1:]) for t in request.inputs))
        self.enqueued_ns = enqueued_ns
        self.deadline_ns = deadline_ns
        self.level = level
        self.result: Outcome = None


class DynamicBatcher(BatchWorkers):
    def __init__(self, pool: InstancePool, signature: ModelSignature, config, where: str) -> None:
        self.statistics = ModelStatistics()
        self._signature = signature
        self._where = where
        self._pool = pool
        batching = config.dynamic_batching
        self._max_batch = signature.max_batch_size
        preferred = sorted({p for p in batching.preferred_batch_size if 0 < p <= self._max_batch})
        self._target = preferred[-1] if preferred else self._max_batch
        self._max_delay_ns = batching.max_queue_delay_microseconds * 1000
        self._preserve_ordering = batching.preserve_ordering
        self._queue = PriorityQueues(batching)
        self._ready = threading.Condition()
        self._closed = False
        self._formed = 0
        self._finished = 0
        self._in_order = threading.Condition()
        self._start_workers([pool.acquire() for _ in range(len(pool))], "batcher")

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def submit(self, request: InferRequest, sink: ResponseSink) -> None:
        """Queue the request and return; a worker sends its final response.
        A request refused at the door (queue full, bad ``timeout``, batcher
        stopped or closing) gets its error on the caller's thread."""
        now = time.perf_counter_ns()
        try:
            level = self._queue.level_of(request.parameters, self._where)
            pending = _Pending(request, sink, now, self._deadline(request, level, now), level)
        except EdgeboxError as exc:
            sink.send(exc, True)
            return
        refused = None
        with self._ready:
            if self.failure is not None:
                self.statistics.record_request(False, 0)
                refused = Unavailable(self.failure)
            elif self._closed:
                refused = Unavailable(f"{self._where}: the model is being unloaded")
            elif self._queue.full(level):
                self.statistics.record_request(False, 0)
                refused = Unavailable(
                    f"{self._where}: request rejected, the queue is full "
                    f"({self._queue.policies[level].max_queue_size} requests waiting; "
                    "max_queue_size)"
                )
            else:
                self._queue.append(pending)
                self._ready.notify()
        if refused is not None:
            sink.send(refused, True)

    def close(self) -> None:
        """Stop the workers once the queue is empty, then close the instances."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._join_workers()
        self._pool.close()

    # -- workers -----------------------------------------------------------

    def _deadline(self, request: InferRequest, level: int, now: int) -> int | None:
        policy = self._queue.policies[level]
        timeout_ns = policy.timeout_ns
        if policy.allow_timeout_override and "timeout" in request.parameters:
            value = request.parameters["timeout"]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgument(
                    f"{self._where}: parameter 'timeout' must be microseconds as an integer"
                )
            timeout_ns = value * 1000
        if not timeout_ns or not policy.reject_late:
            return None
        return now + timeout_ns

    def _form(self, instance: Instance) -> tuple[list[_Pending] | None, int]:
        return self._next_batch()

    def _worker_done(self, instance: Instance) -> None:
        self._pool.release(instance)

    def _take_waiting(self) -> list[_Pending]:
        with self._ready:
            return self._queue.take_all()

    def _stop_serving(self, exc: BaseException, stranded: list) -> None:
        super()._stop_serving(exc, stranded)
        with self._in_order:
            self._in_order.notify_all()

    def _next_batch(self) -> tuple[list[_Pending] | None, int]:
        """The next batch to run (and its place in formation order), or
        (None, 0) once closed and drained. Called by worker threads only."""
        with self._ready:
            while True:
                now = time.perf_counter_ns()
                self._expire(now)
                if not self._queue:
                    if self._closed:
                        return None, 0
                    self._ready.wait()
                    continue
                chosen, size = self._gather()
                oldest = chosen[0].enqueued_ns
                waited_enough = now - oldest >= self._max_delay_ns
                if size >= self._target or waited_enough or self._closed:
                    if size < self._target and waited_enough and self._max_delay_ns:
                        chosen, size = self._gather(limit=self._max_batch)
                    if self._drop_cancelled(chosen, now):
                        continue
                    for pending in chosen:
                        self._queue.remove(pending)
                    self._formed += 1
                    return chosen, self._formed
                self._ready.wait((oldest + self._max_delay_ns - now) / 1e9)

    def _gather(self, limit: int | None = None) -> tuple[list[_Pending], int]:
        """The oldest of the most urgent requests and the compatible ones
        behind it, most urgent first then in arrival order, up to ``limit``
        batch items (the batching target by default)."""
        limit = limit or self._target
        head = self._queue.head()
        chosen: list[_Pending] = []
        size = 0
        for pending in self._queue:
            if pending.key != head.key:
                continue
            if size + pending.batch > limit and chosen:
                break
            chosen.append(pending)
            size += pending.batch
            if size >= limit:
                break
        return chosen, size

    def _expire(self, now: int) -> None:
        late = [p for p in self._queue if p.deadline_ns is not None and now > p.deadline_ns]
        for pending in late:
            self._queue.remove(pending)
            waited_us = (now - pending.enqueued_ns) // 1000
            pending.result = Unavailable(
                f"{self._where}: request timed out after waiting {waited_us} us in the queue "
                "(default_queue_policy timeout)"
            )
            self.statistics.record_request(False, now - pending.enqueued_ns)
            self._send(pending)

    def _drop_cancelled(self, chosen: list[_Pending], now: int) -> bool:
        """Answer and unqueue the chosen requests whose client gave up; True
        when there were any (the batch is then formed anew). Only requests about
        to run are asked, so a long queue costs no calls. Holds ``_ready``."""
        cancelled = [p for p in chosen if p.request.cancelled()]
        for pending in cancelled:
            self._queue.remove(pending)
            pending.result = cancelled_error(self._where)
            self.statistics.record_request(False, now - pending.enqueued_ns)
            self._send(pending)
        return bool(cancelled)

    def _run(self, instance: Instance, batch: list[_Pending]) -> None:
        """Execute the batch and leave each request its response or error in
        ``result``: the adapter from ``execute``'s list to one final per
        request; ``_complete`` sends them. Time spent waiting for the rate
        limiter counts as queue time, as in Triton."""
        clock = time.perf_counter_ns
        with self._pool.running(instance):
            started = clock()
            requests = [self._signature.to_model_shapes(p.request) for p in batch]
            prepared = clock()
            results = execute_all(instance, requests, self._where)
            executed = clock()
        for pending, result in zip(batch, results, strict=True):
            try:
                if isinstance(result, EdgeboxError):
                    raise result
                pending.result = finish_response(
                    result, pending.request, self._signature, self._where
                )
            except EdgeboxError as exc:
                pending.result = exc
        done = clock()
        ok = [answered(p.result) for p in batch]
        self.statistics.record_execution(
            sum(p.batch for p in batch),
            sum(ok),
            prepared - started,
            executed - prepared,
            done - executed,
            inferences=sum(p.batch for p, good in zip(batch, ok, strict=True) if good),
        )
        for pending, good in zip(batch, ok, strict=True):
            self.statistics.record_request(
                good, done - pending.enqueued_ns, started - pending.enqueued_ns
            )

    def _complete(self, batch: list[_Pending], sequence: int) -> None:
        """Send the batch's finals; with ``preserve_ordering`` only after every
        earlier batch's (unless the batcher stopped, when no order is owed)."""
        if self._preserve_ordering:
            with self._in_order:
                self._in_order.wait_for(
                    lambda: self._finished >= sequence - 1 or self.failure is not None
                )
                self._finish(batch)
                self._finished = max(self._finished, sequence)
                self._in_order.notify_all()
        else:
            self._finish(batch)

    def _finish(self, batch: list[_Pending]) -> None:
        for pending in batch:
            self._send(pending)
