"""``throttling``: the telemetry's thermal guard holds a zone at its critical
level (``telemetry.thermal_critical_c``, where an Orin module's clocks start
to be cut). The guard's own hysteresis decides when it clears."""

from __future__ import annotations

from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs, remember
from edgebox.events import ThermalChanged


class ThrottlingRule:
    name: ClassVar[str] = "throttling"
    EVENTS: ClassVar[tuple[type, ...]] = (ThermalChanged,)

    def __init__(self) -> None:
        self._critical: dict[str, ThermalChanged] = {}

    def observe(self, event: Any, now: float) -> None:
        if not isinstance(event, ThermalChanged):
            return
        if event.level == "critical":
            remember(self._critical, event.zone, event)
        else:
            self._critical.pop(event.zone, None)

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        return {
            zone: Finding(
                "critical",
                f"zone '{zone}' reached {event.temperature_c:.1f} °C, past the thermal "
                f"guard's {event.threshold_c:g} °C: the module may throttle its clocks",
            )
            for zone, event in self._critical.items()
        }
