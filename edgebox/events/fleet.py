"""The fleet agent's news: a desired-state document refused, a model's fleet
state changed (events on MQTT ``events``, once each), and the device's whole
reported state, which is no occurrence but a document: MQTT keeps the newest
one retained on ``{prefix}/{device}/fleet`` (docs/fleet.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class FleetDocumentRefused(Event):
    """A desired-state document this device will not apply; nothing changed.
    Published once per document, when it is refused."""

    SCHEMA: ClassVar[str] = "edgebox.fleet.document_refused"

    group: str
    """The group whose desired-state topic carried it: this device's."""
    generation: int | None
    """The document's generation; None when it could not be read that far."""
    key_id: str
    """The key the envelope names (16 hex digits); empty when unreadable."""
    reason: str
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True)
class FleetModelChanged(Event):
    """A model the fleet wants moved from one state to the next on this device."""

    SCHEMA: ClassVar[str] = "edgebox.fleet.model_changed"

    model: str
    state: str
    """downloading, verifying, rolling_out, serving, rejected, failed or not_targeted."""
    version: int | None
    """The desired version; None for a model no longer in the document."""
    reason: str = ""
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True)
class FleetReported(Event):
    """The device's reported state (``edgebox.fleet.reported/1``), published
    as given; only the newest one not yet sent is kept, retained."""

    SCHEMA: ClassVar[str] = "edgebox.fleet.reported"

    document: dict[str, Any]
    """Shared between subscribers: read-only."""
