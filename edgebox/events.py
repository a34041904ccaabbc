"""The in-process event bus: how state changes and results reach MQTT, the
dashboard and the log without the publisher waiting for any of them.

Each subscriber gets its own bounded queue. When a subscriber falls behind, its
oldest event is dropped and counted, never the publisher blocked: a slow
dashboard cannot stall model loading or inference.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelStateChanged:
    model: str
    version: int | None
    """None for model-level states (a config that cannot be read has no versions)."""
    state: str
    reason: str = ""
    timestamp: float = field(default_factory=time.time)


class Subscription:
    """A bounded queue of events for one consumer thread."""

    def __init__(self, bus: EventBus, max_events: int, kinds: tuple[type, ...]) -> None:
        self._bus = bus
        self._events: collections.deque = collections.deque()
        self._max_events = max_events
        self._kinds = kinds
        self._ready = threading.Condition()
        self.dropped = 0

    def _offer(self, event: object) -> None:
        if self._kinds and not isinstance(event, self._kinds):
            return
        with self._ready:
            if len(self._events) >= self._max_events:
                self._events.popleft()
                self.dropped += 1
            self._events.append(event)
            self._ready.notify()

    def get(self, timeout: float | None = None) -> object | None:
        """The next event, or None if none arrives within ``timeout`` seconds."""
        with self._ready:
            if not self._events and not self._ready.wait_for(lambda: self._events, timeout):
                return None
            return self._events.popleft()

    def close(self) -> None:
        self._bus._remove(self)


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._lock = threading.Lock()

    def subscribe(self, *kinds: type, max_events: int = 1000) -> Subscription:
        subscription = Subscription(self, max_events, kinds)
        with self._lock:
            self._subscriptions = [*self._subscriptions, subscription]
        return subscription

    def publish(self, event: object) -> None:
        for subscription in self._subscriptions:
            subscription._offer(event)

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if s is not subscription]
