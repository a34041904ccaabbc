"""What the daemon listens to on the broker besides its own status: topic
filters, each with the callback its messages go to (the fleet agent's
desired state).

Sessions are fresh on every connection (no broker-side session survives a
reconnect), so every filter is subscribed again, QoS 1, on each CONNACK, and
a retained message arrives again each time: a listener sees the current
state after any outage without asking for it.

Callbacks run on the MQTT thread, inside paho's network loop: they must only
hand the payload off (put it on a queue) and return. One that raises is
logged; the link goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import paho.mqtt.client as mqtt

log = logging.getLogger("edgebox.mqtt")

Callback = Callable[[bytes], None]

SUBSCRIBE_QOS = 1


def topic_filter_problem(topic: str) -> str | None:
    """Why ``topic`` cannot be subscribed to, or None."""
    if not topic or "\0" in topic:
        return f"expected a topic filter without NUL, got {topic!r}"
    levels = topic.split("/")
    for index, level in enumerate(levels):
        if ("#" in level and (level != "#" or index != len(levels) - 1)) or (
            "+" in level and level != "+"
        ):
            return (
                "expected '+' and '#' as whole levels, '#' only last (MQTT's topic "
                f"filters), got {topic!r}"
            )
    return None


class Subscriptions:
    """Thread-safe: the daemon adds and removes filters from its threads while
    the MQTT thread subscribes and delivers. ``version`` changes with every
    add or remove, so a live session can catch up without a reconnect."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: dict[str, Callback] = {}
        self._refusals_logged: set[str] = set()
        self.version = 0

    def add(self, topic: str, callback: Callback) -> None:
        """Deliver each message matching ``topic`` to ``callback`` (replacing
        one given before for the same filter). Raises ValueError for a filter
        MQTT refuses."""
        problem = topic_filter_problem(topic)
        if problem is not None:
            raise ValueError(problem)
        with self._lock:
            self._callbacks[topic] = callback
            self.version += 1

    def remove(self, topic: str) -> None:
        with self._lock:
            if self._callbacks.pop(topic, None) is not None:
                self.version += 1

    def topics(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._callbacks)

    def deliver(self, topic: str, payload: bytes) -> None:
        """A message the broker sent (the MQTT thread): to every filter it matches."""
        with self._lock:
            matching = [
                callback
                for pattern, callback in self._callbacks.items()
                if mqtt.topic_matches_sub(pattern, topic)
            ]
        for callback in matching:
            try:
                callback(payload)
            except Exception:
                log.exception("MQTT: the listener of '%s' failed on a message", topic)

    def refused(self, topic: str, reason: object) -> None:
        """The broker refused the subscription (its SUBACK): logged once per
        filter while the daemon runs, since every reconnect asks again."""
        with self._lock:
            if topic in self._refusals_logged:
                return
            self._refusals_logged.add(topic)
        log.warning(
            "MQTT: the broker refused the subscription to '%s' (%s; an ACL?): its messages "
            "will not arrive",
            topic,
            reason,
        )
