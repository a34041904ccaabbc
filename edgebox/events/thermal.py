"""A temperature zone crossed a thermal threshold, or came back below it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class ThermalChanged(Event):
    """Published by the telemetry thread's thermal guard when a zone's level
    changes: up as soon as a threshold is reached, down only once the zone is
    ``telemetry.hysteresis_c`` below it, so a reading hovering at a threshold
    publishes once, not on every sample."""

    SCHEMA: ClassVar[str] = "edgebox.thermal"
    LEVELS: ClassVar[tuple[str, ...]] = ("normal", "warn", "critical")

    zone: str
    """The thermal zone, e.g. ``tj``, ``gpu``, ``cpu``."""
    level: str
    """``normal``, ``warn`` or ``critical``: the zone's level from now on."""
    temperature_c: float
    threshold_c: float
    """The threshold crossed: reached going up; left (by the hysteresis)
    coming down."""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.level not in self.LEVELS:
            raise ValueError(
                f"ThermalChanged: expected level 'normal', 'warn' or 'critical', got '{self.level}'"
            )
