"""The dynamic batcher's queue split by Triton's priority levels
(``dynamic_batching { priority_levels default_priority_level
priority_queue_policy }``): one queue per level, read highest priority (level
1) first, so a batch is formed from the most urgent requests and a level's
requests never wait behind a less urgent level's.

A request's level is its ``priority`` parameter; 0, or a level the model does
not have, means ``default_priority_level``, as Triton's ``SetPriority`` reads
it. Each level has its queue policy (``priority_queue_policy``, else
``default_queue_policy``): how many requests may wait in it and how long.
Without ``priority_levels`` there is one level, and ``priority`` is ignored.
Not thread-safe: the batcher holds its lock around every call.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2

from edgebox.errors import InvalidArgument

DEFAULT_MAX_QUEUE_SIZE = 1024
"""Triton's ``max_queue_size: 0`` means unbounded; edgebox caps it here."""

_REJECT = model_config_pb2.ModelQueuePolicy.REJECT


@dataclass(frozen=True)
class QueuePolicy:
    """One level's ``ModelQueuePolicy``, read once."""

    max_queue_size: int
    timeout_ns: int
    reject_late: bool
    allow_timeout_override: bool

    @classmethod
    def from_config(cls, policy) -> QueuePolicy:
        return cls(
            policy.max_queue_size or DEFAULT_MAX_QUEUE_SIZE,
            policy.default_timeout_microseconds * 1000,
            policy.timeout_action == _REJECT,
            policy.allow_timeout_override,
        )


class PriorityQueues:
    """Items with a ``level`` attribute (0-based), kept in arrival order
    within their level."""

    def __init__(self, batching) -> None:
        levels = batching.priority_levels
        self._default = max(batching.default_priority_level, 1) - 1 if levels else 0
        default_policy = QueuePolicy.from_config(batching.default_queue_policy)
        self.policies = [
            QueuePolicy.from_config(batching.priority_queue_policy[level])
            if level in batching.priority_queue_policy
            else default_policy
            for level in range(1, max(levels, 1) + 1)
        ]
        self._queues: list[collections.deque] = [collections.deque() for _ in self.policies]
        self._single = self._queues[0] if len(self._queues) == 1 else None

    def level_of(self, parameters: dict, where: str) -> int:
        """The 0-based level a request with these parameters waits in."""
        if self._single is not None:
            return 0
        priority = parameters.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
            raise InvalidArgument(
                f"{where}: parameter 'priority' must be an unsigned integer, got {priority!r}"
            )
        if priority == 0 or priority > len(self._queues):
            return self._default
        return priority - 1

    def __len__(self) -> int:
        if self._single is not None:
            return len(self._single)
        return sum(len(queue) for queue in self._queues)

    def full(self, level: int) -> bool:
        return len(self._queues[level]) >= self.policies[level].max_queue_size

    def append(self, item) -> None:
        self._queues[item.level].append(item)

    def head(self):
        """The most urgent item; the queues must not be empty."""
        if self._single is not None:
            return self._single[0]
        return next(iter(self))

    def __iter__(self) -> Iterator:
        if self._single is not None:
            return iter(self._single)
        return itertools.chain.from_iterable(self._queues)

    def remove(self, item) -> None:
        self._queues[item.level].remove(item)

    def take_all(self) -> list:
        items = list(self)
        for queue in self._queues:
            queue.clear()
        return items
