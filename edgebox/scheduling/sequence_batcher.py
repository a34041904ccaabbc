"""Triton's sequence batcher, for stateful models (``sequence_batching``):
every request of a sequence runs on the same instance, one at a time, in
arrival order, with the control inputs and implicit state the config asks for
(``sequence_controls.py``).

A sequence starts with a request flagged ``sequence_start`` and takes a slot
on an instance: a batch slot with the ``direct`` strategy (``max_batch_size``
slots per instance, one without batching), a candidate place with ``oldest``
(``max_candidate_sequences`` per instance; ``max_batch_size`` when 0, as in
Triton). A sequence that finds no free slot waits in the backlog with its
requests, in arrival order, until one frees. The
slot frees when the request flagged ``sequence_end`` has run, or when the
sequence has had no request for ``max_sequence_idle_microseconds``; after
that its ID must start again. A request of a sequence that never started (or
ended, or went idle) is refused with Triton's words, and so is a batched
request of more than one item; neither counts as a failure of the model,
as in Triton.

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
batcher (``failure``), as the dynamic batcher does.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#sequence-batcher
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import numpy as np

from edgebox.backends.base import Instance
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable, one_line
from edgebox.responses import Outcome, ResponseSink
from edgebox.scheduling.direct import (
    answered,
    cancelled_error,
    execute_all,
    finish_response,
)
from edgebox.scheduling.dynamic_batcher import DEFAULT_MAX_QUEUE_SIZE
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.scheduler import Scheduler
from edgebox.scheduling.sequence_controls import SequenceControls
from edgebox.scheduling.sequence_tag import (
    CorrelationId,
    SequenceTag,
    describe_id,
    sequence_tag,
)
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, RequestedOutput, Tensor

log = logging.getLogger(__name__)

DEFAULT_MAX_SEQUENCE_IDLE_US = 1_000_000
"""Triton's default for ``max_sequence_idle_microseconds``."""


class _Pending:
    __slots__ = ("enqueued_ns", "request", "result", "sequence", "sink", "tag")

    def __init__(
        self, request: InferRequest, sink: ResponseSink, tag: SequenceTag, enqueued_ns: int
    ) -> None:
        self.request = request
        self.sink: ResponseSink | None = sink
        self.tag = tag
        self.enqueued_ns = enqueued_ns
        self.sequence: _Sequence | None = None
        self.result: Outcome = None


class _Sequence:
    """One correlation ID's place: its lane and slot once it has one, its
    waiting requests, its implicit state. Guarded by the batcher's lock."""

    __slots__ = ("ending", "id", "idle_since_ns", "lane", "pending", "running", "slot", "state")

    def __init__(self, correlation_id: CorrelationId, now: int) -> None:
        self.id = correlation_id
        self.lane: _Lane | None = None
        self.slot = -1
        self.pending: collections.deque[_Pending] = collections.deque()
        self.running = False
        self.ending = False
        """Its END request is queued or running: only a new START may follow."""
        self.idle_since_ns = now
        self.state: dict[str, np.ndarray] = {}

    def idle(self, now: int, limit_ns: int) -> bool:
        return not self.pending and not self.running and now - self.idle_since_ns >= limit_ns


class _Lane:
    """One instance, its slots and its worker."""

    def __init__(self, index: int, instance: Instance, slots: int) -> None:
        self.index = index
        self.instance = instance
        self.slots: list[_Sequence | None] = [None] * slots

    def free_slots(self) -> int:
        return sum(1 for s in self.slots if s is None)

    def waiting(self) -> list[_Sequence]:
        return [s for s in self.slots if s is not None and s.pending]


class SequenceBatcher(Scheduler):
    def __init__(
        self,
        pool: InstancePool,
        signature: ModelSignature,
        config,
        controls: SequenceControls,
        where: str,
    ) -> None:
        self.statistics = ModelStatistics()
        self.failure: str | None = None
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
        self._idle_ns = idle_us * 1000
        self._max_queue = DEFAULT_MAX_QUEUE_SIZE
        self._queued = 0
        self._sequences: dict[CorrelationId, _Sequence] = {}
        self._backlog: collections.deque[_Sequence] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._outputs = [RequestedOutput(name) for name in controls.state_outputs]
        self._lanes = [_Lane(i, pool.acquire(), slots) for i in range(len(pool))]
        self._workers = [
            threading.Thread(target=self._work, args=(lane,), name="sequencer", daemon=True)
            for lane in self._lanes
        ]
        for worker in self._workers:
            worker.start()

    @property
    def queue_size(self) -> int:
        return self._queued

    @property
    def active_sequences(self) -> int:
        """Sequences holding a slot or waiting for one."""
        with self._cond:
            return len(self._sequences)

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
        sequence = self._sequences.get(tag.id)
        if sequence is not None and sequence.idle(now, self._idle_ns):
            self._release(sequence, now)
            sequence = None
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
            sequence = self._sequences[tag.id] = _Sequence(tag.id, now)
            self._place(sequence)
        if tag.start:
            sequence.ending = False
        if tag.end:
            sequence.ending = True
        pending.sequence = sequence
        sequence.pending.append(pending)
        self._queued += 1
        self._cond.notify_all()
        return None

    def _place(self, sequence: _Sequence) -> bool:
        """Give the sequence a free slot, on the instance with the most free;
        False (and the backlog) when there is none."""
        lane = max(self._lanes, key=lambda lane: lane.free_slots())
        if not lane.free_slots():
            self._backlog.append(sequence)
            return False
        slot = lane.slots.index(None)
        lane.slots[slot] = sequence
        sequence.lane, sequence.slot = lane, slot
        return True

    def _release(self, sequence: _Sequence, now: int) -> None:
        """The sequence ended or idled out: forget it, and hand its slot to the
        oldest sequence in the backlog."""
        if self._sequences.get(sequence.id) is sequence:
            del self._sequences[sequence.id]
        lane = sequence.lane
        if lane is None:
            return
        lane.slots[sequence.slot] = None
        sequence.lane = None
        if self._backlog:
            waiting = self._backlog.popleft()
            waiting.lane, waiting.slot = lane, sequence.slot
            lane.slots[sequence.slot] = waiting
            waiting.idle_since_ns = now
            self._cond.notify_all()

    def close(self) -> None:
        """Run what the slotted sequences have queued, refuse the backlog,
        stop the workers, then close the instances."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join()
        with self._cond:
            stranded = [p for s in self._backlog for p in s.pending]
            self._backlog.clear()
            self._sequences.clear()
        for pending in stranded:
            pending.result = Unavailable(
                f"{self._where}: the model was unloaded before sequence "
                f"{describe_id(pending.tag.id)} got a slot"
            )
            self._send(pending)
        for lane in self._lanes:
            self._pool.release(lane.instance)
        self._pool.close()

    # -- workers -----------------------------------------------------------

    def _work(self, lane: _Lane) -> None:
        batch: list[_Pending | None] = []
        try:
            while True:
                batch = self._next_batch(lane)
                if not batch:
                    return
                try:
                    self._run(lane, batch)
                except BaseException as exc:
                    log.exception("%s: sequence batch failed", self._where)
                    error = EdgeboxError(f"{self._where}: batch failed: {one_line(exc)}")
                    now = time.perf_counter_ns()
                    for pending in batch:
                        if pending is not None and pending.result is None:
                            pending.result = error
                            self.statistics.record_request(False, now - pending.enqueued_ns)
                self._complete(batch)
        except BaseException as exc:
            self._stop_serving(exc, [p for p in batch if p is not None and p.sink is not None])

    def _next_batch(self, lane: _Lane) -> list[_Pending | None]:
        """The lane's next batch (None entries are padding), or [] once the
        batcher closed and the lane has nothing queued."""
        with self._cond:
            while True:
                now = time.perf_counter_ns()
                if self._backlog:
                    self._expire_idle(lane, now)
                waiting = lane.waiting()
                if not waiting:
                    if self._closed:
                        return []
                    self._cond.wait(self._idle_wait(lane, now))
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
                return chosen

    def _choose(self, lane: _Lane, waiting: list[_Sequence]) -> list[_Pending | None] | None:
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

    def _expire_idle(self, lane: _Lane, now: int) -> None:
        for sequence in list(lane.slots):
            if sequence is not None and sequence.idle(now, self._idle_ns):
                self._release(sequence, now)

    def _idle_wait(self, lane: _Lane, now: int) -> float | None:
        """How long the lane may sleep: until its first sequence could idle
        out while the backlog waits for a slot; for ever otherwise."""
        if not self._backlog:
            return None
        deadlines = [
            s.idle_since_ns + self._idle_ns
            for s in lane.slots
            if s is not None and not s.pending and not s.running
        ]
        if not deadlines:
            return None
        return max(min(deadlines) - now, 0) / 1e9

    def _run(self, lane: _Lane, batch: list[_Pending | None]) -> None:
        """Execute the batch and leave each real request its response or
        error in ``result``, and its sequence the state it returned."""
        clock = time.perf_counter_ns
        started = clock()
        template = next(p for p in batch if p is not None)
        requests = [self._model_request(p, template) for p in batch]
        prepared = clock()
        results = execute_all(lane.instance, requests, self._where)
        executed = clock()
        real = [(p, r) for p, r in zip(batch, results, strict=True) if p is not None]
        for pending, result in real:
            try:
                if isinstance(result, EdgeboxError):
                    raise result
                self._keep_state(pending, result)
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

    def _model_request(self, pending: _Pending | None, template: _Pending) -> InferRequest:
        """What the backend gets for one batch row: the client's request (or,
        for padding, zeros shaped like the template's) plus controls and
        input state, asking for the outputs the client wants and the state
        outputs."""
        source = pending if pending is not None else template
        request = self._signature.to_model_shapes(source.request)
        inputs = list(request.inputs)
        if pending is None:
            inputs = [Tensor(t.name, t.datatype, _zeros_like(t.data)) for t in inputs]
        tag = pending.tag if pending is not None else None
        inputs += self._controls.control_tensors(tag)
        sequence = pending.sequence if pending is not None else None
        for state in self._controls.states:
            value = state.initial
            if sequence is not None and not (tag is not None and tag.start):
                value = sequence.state.get(state.input_name, state.initial)
            inputs.append(Tensor(state.input_name, state.datatype, value))
        asked = request.outputs or [RequestedOutput(n) for n in self._signature.outputs]
        names = {o.name for o in asked}
        outputs = list(asked) + [o for o in self._outputs if o.name not in names]
        return InferRequest(
            model_name=request.model_name,
            inputs=inputs,
            model_version=request.model_version,
            id=request.id if pending is not None else "",
            outputs=outputs,
            parameters=request.parameters if pending is not None else {},
            is_cancelled=request.is_cancelled if pending is not None else None,
        )

    def _keep_state(self, pending: _Pending, response) -> None:
        sequence = pending.sequence
        assert sequence is not None
        for state in self._controls.states:
            tensor = response.output(state.output_name)
            if tensor is None:
                raise EdgeboxError(
                    f"{self._where}: the model did not return output state "
                    f"'{state.output_name}' for sequence {describe_id(pending.tag.id)}"
                )
            sequence.state[state.input_name] = tensor.data

    def _complete(self, batch: list[_Pending | None]) -> None:
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
                    self._release(sequence, now)
            self._cond.notify_all()
        for pending in real:
            self._send(pending)

    def _stop_serving(self, exc: BaseException, stranded: list[_Pending]) -> None:
        self.failure = f"{self._where}: a sequence batcher worker stopped: {one_line(exc)}"
        log.critical("%s; reload the model to serve it again", self.failure, exc_info=exc)
        with self._cond:
            for sequence in self._sequences.values():
                stranded += sequence.pending
                sequence.pending.clear()
            self._queued = 0
        for pending in stranded:
            pending.result = Unavailable(self.failure)
            self.statistics.record_request(False, time.perf_counter_ns() - pending.enqueued_ns)
            self._send(pending)

    def _send(self, pending: _Pending) -> None:
        sink, pending.sink = pending.sink, None
        if sink is None:
            return
        try:
            sink.send(pending.result, True)
        except Exception:
            log.exception(
                "%s: the response sink of request '%s' failed", self._where, pending.request.id
            )


def _zeros_like(data: np.ndarray) -> np.ndarray:
    if data.dtype == np.object_:
        return np.full(data.shape, b"", dtype=object)
    return np.zeros_like(data)
