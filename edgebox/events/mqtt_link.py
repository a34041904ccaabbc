"""The MQTT client's link to its broker went up or down, the broker refused it,
or another client publishes as this device."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class MqttLinkChanged(Event):
    """Published by the MQTT thread whenever the link's state changes; a
    refused login is published once, not on every slow retry."""

    SCHEMA: ClassVar[str] = "edgebox.mqtt_link"
    STATES: ClassVar[tuple[str, ...]] = ("connected", "disconnected", "refused", "conflict")

    state: str
    """``connected``, ``disconnected`` (unreachable, or the link dropped),
    ``refused`` (bad credentials, not authorised; ``reason`` has the broker's),
    or ``conflict`` (another client publishes this device's status: two
    devices share a device id; ``reason`` says what was seen)."""
    broker: str
    """The broker's URL, without credentials."""
    reason: str = ""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.state not in self.STATES:
            raise ValueError(
                "MqttLinkChanged: expected state 'connected', 'disconnected', 'refused' or "
                f"'conflict', got '{self.state}'"
            )
