"""The retained ``{prefix}/{device}/status``: ``online`` with what the device
serves, ``offline`` as the last will or at a clean shutdown; when it is out
of date, and what the broker holds (status_watch.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from edgebox.mqtt.spool import Outgoing
from edgebox.mqtt.status_watch import StatusCheck, StatusWatch

log = logging.getLogger("edgebox.mqtt")

SCHEMA = {"name": "edgebox.status", "version": 1}
MIN_INTERVAL_S = 1.0
"""A burst of model or stream changes refreshes the status once."""
REPUBLISH_LOG_INTERVAL_S = 60.0


def online(identity: dict[str, Any], serving: dict[str, Any], now: float) -> dict[str, Any]:
    """``identity``: device, edgebox_version, started_at; ``serving``: models
    (name -> ready versions) and streams (name -> state), as the daemon sees
    them now."""
    return {"schema": SCHEMA, "state": "online", **identity, **serving, "timestamp": now}


def offline(identity: dict[str, Any], reason: str, now: float) -> dict[str, Any]:
    """``reason``: "connection lost" for the last will (whose timestamp is
    when the connection was opened, since the broker sends it later), or
    "shutdown"."""
    return {"schema": SCHEMA, "state": "offline", **identity, "reason": reason, "timestamp": now}


class DeviceStatus:
    """Used on the MQTT thread only."""

    def __init__(
        self,
        identity: dict[str, Any],
        serving: Callable[[], dict[str, Any]],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._serving = serving
        self._clock = clock
        self._wall = wall
        self.identity = identity
        self._watch = StatusWatch(identity["device"], identity["started_at"], clock)
        self.dirty = False
        """A model or stream changed, or the broker holds a status not ours."""
        self._last = float("-inf")
        self._republish_logged = float("-inf")

    def renamed(self, device: str) -> None:
        """New settings gave the device another id."""
        self.identity = {**self.identity, "device": device}
        self._watch = StatusWatch(device, self.identity["started_at"], self._clock)

    def due(self) -> bool:
        return self.dirty and self._clock() - self._last >= MIN_INTERVAL_S

    def message(self, topic: str, qos: int, online_now: bool, reason: str = "") -> Outgoing:
        now = self._wall()
        if online_now:
            self.dirty = False
            self._last = self._clock()
            document = online(self.identity, self._serving(), now)
        else:
            document = offline(self.identity, reason, now)
        return Outgoing(topic, document, "status", qos, retain=True, replaces_unsent=True)

    def published(self, payload: bytes) -> None:
        """A status this daemon sends itself (never its last will)."""
        self._watch.published(payload)

    def connection_opened(self) -> None:
        self._watch.connection_opened()

    def seen(self, payload: bytes, topic: str) -> StatusCheck:
        """A message on the status topic: marks the status out of date when
        the broker's is no longer ours."""
        check = self._watch.seen(payload)
        if check.republish:
            self.dirty = True
            if self._clock() - self._republish_logged >= REPUBLISH_LOG_INTERVAL_S:
                self._republish_logged = self._clock()
                log.warning(
                    "MQTT: the retained status on '%s' is not this daemon's (a last will the "
                    "broker sent late, or another client's); publishing ours again",
                    topic,
                )
        return check
