"""What the MQTT spool lost or could not keep on disk."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class SpoolDropped(Event):
    """Messages the spool dropped unsent (oldest results first when it is
    full), counted per kind; published once the link is back so subscribers
    learn about the gap."""

    SCHEMA: ClassVar[str] = "edgebox.spool_dropped"

    dropped: dict[str, int]
    """Count per message kind: ``result``, ``telemetry``, ``event``, ``status``."""
    reason: str
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True)
class SpoolDegraded(Event):
    """The spool's disk is full, read-only or broken: it keeps messages in
    memory only from now on, so a power cut loses them."""

    SCHEMA: ClassVar[str] = "edgebox.spool_degraded"

    reason: str
    timestamp: float = field(default_factory=time.time)
