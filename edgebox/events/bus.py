"""The in-process event bus: how state changes and results reach MQTT, the
dashboard and the log without the publisher waiting for any of them.

Each subscriber gets its own bounded queue. When a subscriber falls behind, its
oldest event is dropped and counted, never the publisher blocked: a slow
dashboard or a dead broker cannot stall model loading or inference.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from edgebox.events.event import Event


class Subscription:
    """A bounded queue of events for one consumer thread.

    Any thread may publish into it (through the bus) or close it; one consumer
    thread reads it with ``get`` or ``get_batch``. When full, the oldest event
    is dropped and counted in ``dropped``."""

    def __init__(self, bus: EventBus, max_events: int, kinds: tuple[type, ...]) -> None:
        if max_events < 1:
            raise ValueError(f"subscribe: expected max_events >= 1, got {max_events}")
        self._bus = bus
        self._events: collections.deque[Event] = collections.deque()
        self._max_events = max_events
        self._kinds = kinds
        self._ready = threading.Condition()
        self._dropped = 0
        self._closed = False
        self._waker: Callable[[], None] | None = None

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """Called, outside the queue's lock, when an event lands in an empty
        queue: for a consumer that waits on something else too (the MQTT
        thread waits on the broker's socket) and must not sleep through an
        event. A queue that already held events has woken it already, and
        ``get_batch`` takes them all; at thousands of results a second this
        spares a system call per event."""
        self._waker = waker

    @property
    def queued(self) -> int:
        """Events waiting now; a glance for a consumer about to sleep."""
        return len(self._events)

    @property
    def dropped(self) -> int:
        """Events dropped (oldest first) because this subscriber fell behind."""
        return self._dropped

    @property
    def closed(self) -> bool:
        return self._closed

    def _offer(self, event: Event) -> None:
        if self._kinds and not isinstance(event, self._kinds):
            return
        with self._ready:
            if self._closed:
                return
            was_empty = not self._events
            if len(self._events) >= self._max_events:
                self._events.popleft()
                self._dropped += 1
            self._events.append(event)
            self._ready.notify()
        waker = self._waker
        if waker is not None and was_empty:
            waker()

    def _wait_locked(self, timeout: float | None) -> bool:
        """True when an event is queued; False on timeout or once closed."""
        self._ready.wait_for(lambda: self._events or self._closed, timeout)
        return bool(self._events) and not self._closed

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, oldest first; None if none arrives within
        ``timeout`` seconds (None waits until one does) or once closed."""
        with self._ready:
            if not self._wait_locked(timeout):
                return None
            return self._events.popleft()

    def get_batch(self, max_events: int, timeout: float | None = None) -> list[Event]:
        """Waits up to ``timeout`` seconds for the first event, then returns at
        once everything queued, at most ``max_events``, oldest first: one wake-up
        per burst for a consumer that writes in batches (the MQTT spool).
        [] on timeout or once closed."""
        if max_events < 1:
            raise ValueError(f"get_batch: expected max_events >= 1, got {max_events}")
        with self._ready:
            if not self._wait_locked(timeout):
                return []
            count = min(max_events, len(self._events))
            return [self._events.popleft() for _ in range(count)]

    def close(self) -> None:
        """Leaves the bus and discards what is queued; a thread blocked in
        ``get``/``get_batch`` returns None/[] at once, and so does every later
        call. Idempotent, from any thread."""
        with self._ready:
            if self._closed:
                return
            self._closed = True
            self._events.clear()
            self._ready.notify_all()
        self._bus._remove(self)


class EventBus:
    """Fan-out of events to subscriptions. ``publish`` may be called from any
    thread and never blocks beyond a subscriber's short queue lock."""

    def __init__(self) -> None:
        self._subscriptions: tuple[Subscription, ...] = ()
        self._dropped_by_closed = 0
        self._lock = threading.Lock()

    def subscribe(self, *kinds: type, max_events: int = 1000) -> Subscription:
        """A subscription to events of ``kinds`` (every event when none is
        given) published from now on; it keeps at most ``max_events``."""
        subscription = Subscription(self, max_events, kinds)
        with self._lock:
            self._subscriptions = (*self._subscriptions, subscription)
        return subscription

    def publish(self, event: Event) -> None:
        for subscription in self._subscriptions:
            subscription._offer(event)

    @property
    def subscriptions(self) -> tuple[Subscription, ...]:
        """The open subscriptions, a snapshot."""
        return self._subscriptions

    def dropped_total(self) -> int:
        """Events dropped by every subscription since the bus was made, closed
        ones included, so it never goes down (a Prometheus counter)."""
        with self._lock:
            return self._dropped_by_closed + sum(s.dropped for s in self._subscriptions)

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscriptions:
                self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)
                self._dropped_by_closed += subscription.dropped
