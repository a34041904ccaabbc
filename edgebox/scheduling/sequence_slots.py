"""Which sequence holds which slot of which instance, for the sequence batcher.

A sequence takes a slot when it starts, on the instance with the most free
slots. One that finds none waits in the backlog, in arrival order, until a
slot frees: when the sequence holding it has ended, or has had no request for
``max_sequence_idle_microseconds``. After that its ID must start again. The
sequence that takes over a slot starts its idle clock then.

Not thread-safe: the batcher's lock guards every call, and ``on_handed``,
called when a backlog sequence gets a slot, runs under it so the batcher can
wake that lane's worker.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np

from edgebox.backends.base import Instance
from edgebox.scheduling.sequence_tag import CorrelationId


class Sequence:
    """One correlation ID's place: its lane and slot once it has one, its
    waiting requests, its implicit state."""

    __slots__ = ("ending", "id", "idle_since_ns", "lane", "pending", "running", "slot", "state")

    def __init__(self, correlation_id: CorrelationId, now: int) -> None:
        self.id = correlation_id
        self.lane: Lane | None = None
        self.slot = -1
        self.pending: collections.deque = collections.deque()
        """Its requests not yet run, in arrival order (the batcher's own kind)."""
        self.running = False
        self.ending = False
        """Its END request is queued or running: only a new START may follow."""
        self.idle_since_ns = now
        self.state: dict[str, np.ndarray] = {}

    def idle(self, now: int, limit_ns: int) -> bool:
        return not self.pending and not self.running and now - self.idle_since_ns >= limit_ns


class Lane:
    """One instance, its slots and its worker."""

    def __init__(self, index: int, instance: Instance, slots: int) -> None:
        self.index = index
        self.instance = instance
        self.slots: list[Sequence | None] = [None] * slots

    def free_slots(self) -> int:
        return sum(1 for s in self.slots if s is None)

    def waiting(self) -> list[Sequence]:
        return [s for s in self.slots if s is not None and s.pending]


class SequenceSlots:
    def __init__(self, lanes: list[Lane], idle_ns: int, on_handed: Callable[[], None]) -> None:
        self.lanes = lanes
        self.sequences: dict[CorrelationId, Sequence] = {}
        """Sequences holding a slot or waiting for one."""
        self.backlog: collections.deque[Sequence] = collections.deque()
        self._idle_ns = idle_ns
        self._on_handed = on_handed

    def current(self, correlation_id: CorrelationId, now: int) -> Sequence | None:
        """The ID's sequence, unless it has none or it idled out (its slot
        then goes to the backlog)."""
        sequence = self.sequences.get(correlation_id)
        if sequence is not None and sequence.idle(now, self._idle_ns):
            self.release(sequence, now)
            return None
        return sequence

    def start(self, correlation_id: CorrelationId, now: int) -> Sequence:
        """A new sequence for the ID, in a free slot or the backlog."""
        sequence = self.sequences[correlation_id] = Sequence(correlation_id, now)
        self._place(sequence)
        return sequence

    def _place(self, sequence: Sequence) -> None:
        """Give the sequence a free slot, on the instance with the most free,
        or a place in the backlog when there is none."""
        lane = max(self.lanes, key=lambda lane: lane.free_slots())
        if not lane.free_slots():
            self.backlog.append(sequence)
            return
        slot = lane.slots.index(None)
        lane.slots[slot] = sequence
        sequence.lane, sequence.slot = lane, slot

    def release(self, sequence: Sequence, now: int) -> None:
        """The sequence ended or idled out: forget it, and hand its slot to the
        oldest sequence in the backlog."""
        if self.sequences.get(sequence.id) is sequence:
            del self.sequences[sequence.id]
        lane = sequence.lane
        if lane is None:
            return
        lane.slots[sequence.slot] = None
        sequence.lane = None
        if self.backlog:
            waiting = self.backlog.popleft()
            waiting.lane, waiting.slot = lane, sequence.slot
            lane.slots[sequence.slot] = waiting
            waiting.idle_since_ns = now
            self._on_handed()

    def expire_idle(self, lane: Lane, now: int) -> None:
        for sequence in list(lane.slots):
            if sequence is not None and sequence.idle(now, self._idle_ns):
                self.release(sequence, now)

    def idle_wait(self, lane: Lane, now: int) -> float | None:
        """How long the lane may sleep: until its first sequence could idle
        out while the backlog waits for a slot; for ever otherwise."""
        if not self.backlog:
            return None
        deadlines = [
            s.idle_since_ns + self._idle_ns
            for s in lane.slots
            if s is not None and not s.pending and not s.running
        ]
        if not deadlines:
            return None
        return max(min(deadlines) - now, 0) / 1e9
