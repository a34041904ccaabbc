"""The hand-off between a stream's capture thread and its inference threads."""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class FrameQueue(Generic[T]):
    """Bounded, drop-oldest: when the model is slower than the source, the
    frame waiting longest is the stalest, so it goes (counted in ``dropped``)
    and the capture thread never waits. One producer thread; consumers take
    turns (the inference loop serializes its ``get`` calls).

    A producer whose frames cannot go stale (a video file read as fast as the
    model goes) calls ``wait_for_room`` before reading the next one, rather
    than decode frames only to drop them."""

    def __init__(self, max_items: int) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self._items: collections.deque[T] = collections.deque()
        self._max_items = max_items
        self._ready = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: T) -> bool:
        """Queue ``item``; True if the oldest item was dropped to make room.
        After ``close`` the item is discarded."""
        with self._ready:
            if self._closed:
                return False
            dropped = len(self._items) >= self._max_items
            if dropped:
                self._items.popleft()
                self.dropped += 1
            self._items.append(item)
            self._ready.notify()
            return dropped

    def get(self, timeout_s: float | None = None) -> T | None:
        """The oldest item; None once closed or when ``timeout_s`` passes."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._items or self._closed, timeout_s):
                return None
            if self._closed:
                return None
            item = self._items.popleft()
            self._ready.notify_all()
            return item

    def wait_for_room(self, timeout_s: float | None = None) -> bool:
        """Block until a ``put`` would drop nothing; False once closed or
        when ``timeout_s`` passes first."""
        with self._ready:
            room = self._ready.wait_for(
                lambda: len(self._items) < self._max_items or self._closed, timeout_s
            )
            return bool(room) and not self._closed

    def close(self) -> None:
        """Wake the consumer with None; items still queued are discarded."""
        with self._ready:
            self._closed = True
            self._items.clear()
            self._ready.notify_all()

    def __len__(self) -> int:
        with self._ready:
            return len(self._items)
