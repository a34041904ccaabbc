"""Triton's sequence batcher, for stateful models (``sequence_batching``):
every request of a sequence runs on the same instance, one at a time, in
arrival order, with the control inputs and implicit state the config asks for
(``sequence_controls.py``).

A sequence starts with a request flagged ``sequence_start`` and takes a slot
on an instance (``sequence_slots.py``): a batch slot with the ``direct``
strategy (``max_batch_size`` slots per instance, one without batching), a
candidate place with ``oldest`` (``max_candidate_sequences`` per instance;
``max_batch_size`` when 0, as in Triton). A sequence that finds no free slot
waits in the backlog with its requests until one frees. The slot frees when
the request flagged ``sequence_end`` has run, or when the sequence has had no
request for ``max_sequence_idle_microseconds``. A request of a sequence that
never started (or ended, or went idle) is refused with Triton's words, and so
is a batched request of more than one item; neither counts as a failure of
the model, as in Triton.

One worker thread per instance forms its batches, so a sequence's next
request never overtakes its previous one and the state the previous returned
is in place before the next runs. ``direct`` batches hold one request per
slot in slot order, up to the highest slot with a request, and pad the empty
slots below it with requests marked not READY (zero inputs, answers dropped),
as Triton does, so a model that keeps state per batch row sees each sequence
in its own row. It waits up to ``max_queue_delay_microseconds`` for
``minimum_slot_utilization``. ``oldest`` batches the oldest waiting requests of
different sequences, up to the largest ``preferred_batch_size`` or
``max_batch_size``, waiting up to ``max_queue_delay_microseconds`` for more.

Requests waiting at once are capped (``DEFAULT_MAX_QUEUE_SIZE`` unless
``max_queue_size`` says otherwise); one beyond is refused UNAVAILABLE at once.
A request whose client gave up is answered CANCELLED unrun, unless it starts
or ends its sequence: those run anyway (their answers dropped), so the
sequence's state and slot stay right. Whatever ``execute`` raises fails that
batch's requests and the worker goes on; a worker that dies itself stops the
batcher (``failure``), as the dynamic batcher does (``batch_workers.py``).
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#sequence-batcher
"""

from __future__ import annotations

import threading
import time

from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable
from edgebox.responses import Outcome, ResponseSink
from edgebox.scheduling.batch_workers import BatchWorkers, QueuedRequest
from edgebox.scheduling.direct import answered, cancelled_error, execute_all, finish_response
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.priority_queues import DEFAULT_MAX_QUEUE_SIZE
from edgebox.scheduling.sequence_controls import SequenceControls
from edgebox.scheduling.sequence_slots import Lane, Sequence, SequenceSlots
from edgebox.scheduling.sequence_tag import SequenceTag, describe_id, sequence_tag
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest

DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000
"""Triton's default for ``max_sequence_idle_microseconds``."""


class _Pending(QueuedRequest):
    """One request of a sequence, queued behind the sequence's earlier ones."""

    __slots__ = ("sequence", "tag")

    def __init__(
        self, request: InferRequest, sink: ResponseSink, tag: SequenceTag, enqueued_ns: int
    ) -> None:
        self.request = request
        self.sink: ResponseSink | None = sink
        self.tag = tag
        self.enqueued_ns = enqueued_ns
        self.sequence: Sequence | None = None
        self.result: Outcome = None


class SequenceBatcher(BatchWorkers):
    _kind = "sequence "

    def __init__(
        self,
        pool: InstancePool,
        signature: ModelSignature,
        config,
        controls: SequenceControls,
        where: str,
    ) -> None:
        self.statistics = ModelStatistics()
        self._signature = signature
        self._controls = controls
        self._where = where
        self._model_name = config.name
        self._pool = pool
        batching = config.sequence_batching
        self._max_batch = signature.max_batch_size
        self._oldest = batching.HasField("oldest")
        if self._oldest:
            oldest = batching.oldest
            slots = oldest.max_candidate_sequences or max(self._max_batch, 1)
            preferred = sorted(
                {p for p in oldest.preferred_batch_size if 0 < p <= max(self._max_batch, 1)}
            )
            self._target = preferred[-1] if preferred else max(self._max_batch, 1)
            self._delay_ns = oldest.max_queue_delay_microseconds * 1000
            self._min_utilization = 0.0
        else:
            slots = max(self._max_batch, 1)
            self._target = slots
            self._delay_ns = batching.direct.max_queue_delay_microseconds * 1000
            self._min_utilization = batching.direct.minimum_slot_utilization
        idle_us = batching.max_sequence_idle_microseconds or DEFAULT_MAX_SEQUENCE_IDLE_US
        self._max_queue = DEFAULT_MAX_QUEUE_SIZE
        self._queued = 0
        self._cond = threading.Condition()
        self._closed = False
        lanes = [Lane(i, pool.acquire(), slots) for i in range(len(pool))]
        self._slots = SequenceSlots(lanes, idle_us * 1000, self._cond.notify_all)
        self._start_workers(lanes, "sequencer")

    @property
    def queue_size(self) -> int:
        return self._queued

    @property
    def active_sequences(self) -> int:
        """Sequences holding a slot or waiting for one."""
        with self._cond:
            return len(self._slots.sequences)

    def submit(self, request: InferRequest, sink: ResponseSink) -> None:
        """Queue the request behind its sequence's; a worker sends its final.
        Refusals (no or bad ID, a sequence that did not start, batch size,
        a full queue, closing) come on the caller's thread."""
        try:
            tag = self._admit(request)
        except EdgeboxError as exc:
            sink.send(exc, True)
            return
        now = time.perf_counter_ns()
        pending = _Pending(request, sink, tag, now)
        refused = None
        with self._cond:
            refused = self._enqueue(pending, now)
        if refused is not None:
            sink.send(refused, True)

    def _admit(self, request: InferRequest) -> SequenceTag:
        tag = sequence_tag(request, self._model_name)
        if self._max_batch > 0 and request.inputs and request.inputs[0].data.shape[0] != 1:
            raise InvalidArgument(
                f"inference request to model '{self._model_name}' must specify batch-size 1 "
                "due to requirements of sequence batcher"
            )
        self._controls.check_id(tag.id)
        return tag

    def _enqueue(self, pending: _Pending, now: int) -> EdgeboxError | None:
        """Under the lock: the refusal, or None once the request is queued."""
        if self.failure is not None:
            self.statistics.record_request(False, 0)
            return Unavailable(self.failure)
        if self._closed:
            return Unavailable(f"{self._where}: the model is being unloaded")
        tag = pending.tag
        sequence = self._slots.current(tag.id, now)
        if not tag.start and (sequence is None or sequence.ending):
            return InvalidArgument(
                f"inference request for sequence {describe_id(tag.id)} to model "
                f"'{self._model_name}' must specify the START flag on the first request of "
                "the sequence"
            )
        if self._queued >= self._max_queue:
            self.statistics.record_request(False, 0)
            return Unavailable(
                f"{self._where}: request rejected, the queue is full ({self._max_queue} "
                "requests waiting)"
            )
        if sequence is None:
            sequence = self._slots.start(tag.id, now)
        if tag.start:
            sequence.ending = False
        if tag.end:
            sequence.ending = True
        pending.sequence = sequence
        sequence.pending.append(pending)
        self._queued += 1
        self._cond.notify_all()
        return None

    def close(self) -> None:
        """Run what the slotted sequences have queued, refuse the backlog,
        stop the workers, then close the instances."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._join_workers()
        with self._cond:
            stranded = [p for s in self._slots.backlog for p in s.pending]
            self._slots.backlog.clear()
            self._slots.sequences.clear()
        for pending in stranded:
            pending.result = Unavailable(
                f"{self._where}: the model was unloaded before sequence "
                f"{describe_id(pending.tag.id)} got a slot"
            )
            self._send(pending)
        for lane in self._slots.lanes:
            self._pool.release(lane.instance)
        self._pool.close()

    # -- workers -----------------------------------------------------------

    def _form(self, lane: Lane) -> tuple[list[_Pending | None] | None, int]:
        """The lane's next batch (None entries are padding). Its place is 0:
        a sequence's requests all run on one lane, one at a time, so no order
        between batches is owed."""
        with self._cond:
            while True:
                now = time.perf_counter_ns()
                if self._slots.backlog:
                    self._slots.expire_idle(lane, now)
                waiting = lane.waiting()
                if not waiting:
                    if self._closed:
                        return None, 0
                    self._cond.wait(self._slots.idle_wait(lane, now))
                    continue
                oldest = min(s.pending[0].enqueued_ns for s in waiting)
                due = oldest + self._delay_ns
                if self._oldest:
                    enough = len(waiting) >= self._target
                else:
                    enough = len(waiting) >= self._min_utilization * len(lane.slots)
                if not (enough or now >= due or self._closed):
                    self._cond.wait((due - now) / 1e9)
                    continue
                chosen = self._choose(lane, waiting)
                if chosen is None:
                    continue
                return chosen, 0

    def _choose(self, lane: Lane, waiting: list[Sequence]) -> list[_Pending | None] | None:
        """Pop the batch's requests; None when cancelled ones were answered
        instead (the batch is formed anew). Holds the lock."""
        if self._oldest:
            waiting = sorted(waiting, key=lambda s: s.pending[0].enqueued_ns)
            taken = waiting[: max(self._max_batch, 1)]
        else:
            taken = waiting if self._max_batch > 0 else waiting[:1]
        dropped = False
        for sequence in taken:
            head = sequence.pending[0]
            if not (head.tag.start or head.tag.end) and head.request.cancelled():
                sequence.pending.popleft()
                self._queued -= 1
                sequence.idle_since_ns = time.perf_counter_ns()
                head.result = cancelled_error(self._where)
                self.statistics.record_request(False, time.perf_counter_ns() - head.enqueued_ns)
                self._send(head)
                dropped = True
        if dropped:
            return None
        batch: list[_Pending | None] = []
        for sequence in taken:
            head = sequence.pending.popleft()
            self._queued -= 1
            sequence.running = True
            batch.append(head)
        if self._oldest or self._max_batch == 0:
            return batch
        by_slot: list[_Pending | None] = [None] * (max(s.slot for s in taken) + 1)
        for pending in batch:
            assert pending is not None and pending.sequence is not None
            by_slot[pending.sequence.slot] = pending
        return by_slot

    def _run(self, lane: Lane, batch: list[_Pending | None]) -> None:
        """Execute the batch and leave each real request its response or
        error in ``result``, and its sequence the state it returned."""
        clock = time.perf_counter_ns
        started = clock()
        template = next(p for p in batch if p is not None)
        requests = [
            self._controls.row_request(
                self._signature.to_model_shapes((p or template).request),
                p.tag if p is not None else None,
                p.sequence.state if p is not None and p.sequence is not None else None,
                self._signature.outputs,
            )
            for p in batch
        ]
        with self._pool.running(lane.instance):
            prepared = clock()
            results = execute_all(lane.instance, requests, self._where)
            executed = clock()
        real = [(p, r) for p, r in zip(batch, results, strict=True) if p is not None]
        for pending, result in real:
            try:
                if isinstance(result, EdgeboxError):
                    raise result
                assert pending.sequence is not None
                self._controls.keep_state(
                    pending.sequence.state, result, pending.tag.id, self._where
                )
                pending.result = finish_response(
                    result, pending.request, self._signature, self._where
                )
            except EdgeboxError as exc:
                pending.result = exc
        done = clock()
        ok = [answered(pending.result) for pending, _ in real]
        self.statistics.record_execution(
            len(real),
            sum(ok),
            prepared - started,
            executed - prepared,
            done - executed,
            inferences=sum(ok),
        )
        for (pending, _), good in zip(real, ok, strict=True):
            self.statistics.record_request(
                good, done - pending.enqueued_ns, started - pending.enqueued_ns
            )

    def _complete(self, batch: list[_Pending | None], place: int) -> None:
        """Free what ended, then send the finals: a client that starts the
        same ID again as soon as it has its END answer finds the slot free."""
        real = [p for p in batch if p is not None]
        now = time.perf_counter_ns()
        with self._cond:
            for pending in real:
                sequence = pending.sequence
                assert sequence is not None
                sequence.running = False
                sequence.idle_since_ns = now
                if pending.tag.end and not sequence.pending:
                    self._slots.release(sequence, now)
            self._cond.notify_all()
        for pending in real:
            self._send(pending)

    def _take_waiting(self) -> list[QueuedRequest]:
        waiting: list[QueuedRequest] = []
        with self._cond:
            for sequence in self._slots.sequences.values():
                waiting += sequence.pending
                sequence.pending.clear()
            self._queued = 0
        return waiting
