"""``mqtt_offline``: the MQTT link not connected for
``alerts.mqtt_offline_after_s``, judged from the forwarder's figures (so a
link that never came up counts from the daemon's start). A refused login or
another device publishing as this one is ``critical``: neither heals by
waiting. Events add the broker's reason."""

from __future__ import annotations

from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs
from edgebox.events import MqttLinkChanged

SUBJECT = "mqtt link"
UP = ("connected", "stopped")
"""``stopped``: the daemon is shutting down; no alert."""


class MqttOfflineRule:
    name: ClassVar[str] = "mqtt_offline"
    EVENTS: ClassVar[tuple[type, ...]] = (MqttLinkChanged,)

    def __init__(self, after_s: float) -> None:
        self._after_s = after_s
        self._down_since: float | None = None
        self._last_event: MqttLinkChanged | None = None

    def observe(self, event: Any, now: float) -> None:
        if isinstance(event, MqttLinkChanged):
            self._last_event = event

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        stats = inputs.mqtt
        if stats is None or stats.state in UP:
            self._down_since = None
            return {}
        if self._down_since is None:
            self._down_since = now
        seconds = now - self._down_since
        if seconds < self._after_s:
            return {}
        event = self._last_event
        state = event.state if event is not None and event.state != "connected" else stats.state
        reason = f": {event.reason}" if event is not None and event.reason else ""
        severity = "critical" if state in ("refused", "conflict") else "warn"
        message = f"MQTT link to {stats.broker} {state} for {seconds:.0f} s{reason}"
        return {SUBJECT: Finding(severity, message)}
