"""Which bus events become MQTT messages, on which topic, of which kind.

The kind decides what a full spool gives up first (spool.py): results go
before events, events before status (the fleet's reported state counts as
status: it is retained and replaces its unsent predecessor). Stream results are thinned here, on the
MQTT thread, by each stream's ``results_every_n`` and ``max_results_per_s``:
a subscriber that wants 1 frame a second should not cost the spool 15.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from edgebox.events import (
    OCCURRENCES,
    FleetReported,
    ModelResult,
    ModelStateChanged,
    StreamResult,
    StreamStatus,
    TelemetrySnapshot,
)
from edgebox.mqtt.spool import Outgoing
from edgebox.mqtt.topics import Topics

EVENT_KINDS = OCCURRENCES
"""Published on ``{prefix}/{device}/events``."""
STATUS_CHANGES = (ModelStateChanged, StreamStatus)
"""Events after which the retained status document is out of date."""


@dataclass(frozen=True)
class ResultPace:
    """A stream's thinning: every ``every_n``-th result, at most ``max_per_s``
    a second (0: no cap)."""

    every_n: int = 1
    max_per_s: float = 0.0


class Router:
    """Not thread-safe: the MQTT thread alone routes."""

    def __init__(
        self,
        topics: Topics,
        device: str,
        qos: int,
        paces: Mapping[str, ResultPace] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self._device = device
        self._qos = qos
        self._paces = dict(paces or {})
        self._clock = clock
        self._seen: dict[str, int] = {}
        self._last_sent: dict[str, float] = {}
        self.thinned = 0
        """Stream results left out by their stream's pace (not drops)."""

    def route(self, event: object) -> Outgoing | None:
        """The message for ``event``, or None when it is not published."""
        if isinstance(event, StreamResult):
            if not self._keep(event.stream):
                self.thinned += 1
                return None
            return self._message(self.topics.stream_results(event.stream), event, "result")
        if isinstance(event, ModelResult):
            return self._message(self.topics.model_results(event.model), event, "result")
        if isinstance(event, EVENT_KINDS):
            return self._message(self.topics.events, event, "event")
        if isinstance(event, TelemetrySnapshot):
            return self._message(self.topics.telemetry, event, "telemetry")
        if isinstance(event, FleetReported):
            # Like the status: retained, and a newer report replaces one still
            # unsent (an outage keeps one report, not each step's).
            return Outgoing(
                self.topics.fleet,
                dict(event.document),
                "status",
                self._qos,
                retain=True,
                replaces_unsent=True,
            )
        return None

    def _message(self, topic: str, event, kind: str) -> Outgoing:
        document = {**event.as_dict(), "device": self._device}
        return Outgoing(topic=topic, document=document, kind=kind, qos=self._qos)

    def _keep(self, stream: str) -> bool:
        pace = self._paces.get(stream)
        if pace is None:
            return True
        seen = self._seen.get(stream, 0)
        self._seen[stream] = seen + 1
        if seen % pace.every_n:
            return False
        if pace.max_per_s > 0:
            now = self._clock()
            last = self._last_sent.get(stream)
            if last is not None and now - last < 1.0 / pace.max_per_s:
                return False
            self._last_sent[stream] = now
        return True
