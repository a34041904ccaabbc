"""What the broker holds as this device's retained status, watched through a
subscription to the device's own status topic.

Two things go wrong there that only a subscriber sees:
- a retained ``offline`` that is not the daemon's latest word replaces it: a
  last will the broker sends late (it noticed an old connection's death only
  after its keep-alive ran out), or one another client published. The daemon
  then publishes its status again;
- another device publishes as this one: two devices share a device id (an
  image cloned with ``mqtt.device_id`` set). With one client id they knock
  each other off the broker in a loop, and each finds the other's last will
  on its status topic at every reconnect; with two, each sees the other's
  status. Either way the status names a daemon started at another time.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

CONFLICT_WINDOW_S = 600.0
"""Two statuses of another daemon within this long are a conflict (one alone
may be what a previous run of this daemon left), and so is another daemon's
``online`` while ours stands; reported once per window."""
OURS_KEPT = 16
MAX_DOCUMENT_BYTES = 64 * 1024
"""A status document is a few kB; anything larger on the topic is not one,
and is not parsed on the MQTT thread."""


@dataclass(frozen=True)
class StatusCheck:
    republish: bool = False
    """The broker's retained status is no longer ours: publish it again. Never
    in answer to another daemon's ``online``, so two never take turns, except
    once with a conflict, so that the other daemon sees us and reports it too."""
    conflict: str | None = None
    """Another daemon publishes as this device: what was seen, for the log."""


class StatusWatch:
    """Used on the MQTT thread only."""

    def __init__(
        self, device: str, started_at: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._device = device
        self._started_at = started_at
        self._clock = clock
        self._ours: deque[bytes] = deque(maxlen=OURS_KEPT)
        self._confirmed = False
        """The broker echoed our latest status: the retained one is ours."""
        self._others: deque[float] = deque(maxlen=2)
        """When another daemon's status was last seen: two within the window
        are all a conflict needs, so a flood keeps no more."""
        self._reported = float("-inf")

    def published(self, payload: bytes) -> None:
        """A status the daemon publishes itself (never a last will: one the
        broker sends later is stale by then)."""
        self._ours.append(payload)
        self._confirmed = False

    def connection_opened(self) -> None:
        self._confirmed = False

    def seen(self, payload: bytes) -> StatusCheck:
        if payload in self._ours:
            if payload == self._ours[-1]:
                self._confirmed = True
            return StatusCheck()
        try:
            document = json.loads(payload) if len(payload) <= MAX_DOCUMENT_BYTES else None
        except ValueError:
            document = None
        if not isinstance(document, dict):
            document = {}
        another = "started_at" in document and document["started_at"] != self._started_at
        online = document.get("state") == "online"
        conflict = self._another_daemon(document, self._confirmed and online) if another else None
        republish = (self._confirmed and not (another and online)) or conflict is not None
        if republish:
            self._confirmed = False
        return StatusCheck(republish=republish, conflict=conflict)

    def _another_daemon(self, document: dict, live: bool) -> str | None:
        """``live``: it said ``online`` while our own status stood, which no
        earlier run of ours can do: a conflict at once."""
        now = self._clock()
        while self._others and now - self._others[0] > CONFLICT_WINDOW_S:
            self._others.popleft()
        self._others.append(now)
        if (len(self._others) < 2 and not live) or now - self._reported < CONFLICT_WINDOW_S:
            return None
        self._reported = now
        state = document.get("state", "?")
        reason = f", reason '{document['reason']}'" if document.get("reason") else ""
        return (
            f"another daemon publishes as device '{self._device}' (a status {state}{reason}, "
            f"started_at {document.get('started_at')}, not ours {self._started_at}): two "
            "devices share this device id; give each its own mqtt.device_id (the default, "
            "hostname and machine id, is unique per device)"
        )
