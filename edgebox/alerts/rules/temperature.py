"""``temperature``: a thermal zone past the alert thresholds (``alerts.
temperature_*``), warn then critical, each level left ``temperature_clear_c``
below its threshold."""

from __future__ import annotations

from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.level import LevelTracker
from edgebox.alerts.rules.base import Inputs, remember


class TemperatureRule:
    name: ClassVar[str] = "temperature"
    EVENTS: ClassVar[tuple[type, ...]] = ()

    def __init__(
        self,
        warn_c: float,
        critical_c: float,
        clear_c: float,
        for_s: float,
        zone_max_c: dict[str, float] | None = None,
    ) -> None:
        """A zone in ``zone_max_c`` is critical at its own limit and warns
        ``critical_c - warn_c`` below it."""
        self._warn_c = warn_c
        self._critical_c = critical_c
        self._clear_c = clear_c
        self._for_s = for_s
        self._zone_max_c = dict(zone_max_c or {})
        self._zones: dict[str, LevelTracker] = {}
        self._last_c: dict[str, float] = {}

    def observe(self, event: Any, now: float) -> None:
        pass

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        """A zone the latest sample lacks (an offline sensor) keeps its level."""
        if inputs.sample is not None:
            for zone, celsius in inputs.sample.temperatures_c.items():
                tracker = self._zones.get(zone) or self._tracker(zone)
                tracker.feed(celsius, now)
                remember(self._zones, zone, tracker)
                remember(self._last_c, zone, celsius)
        found = {}
        for zone, tracker in self._zones.items():
            if tracker.level is not None:
                message = f"zone '{zone}' at {self._last_c[zone]:.1f} °C ({tracker.describe()} °C)"
                found[zone] = Finding(tracker.level, message)
        return found

    def _tracker(self, zone: str) -> LevelTracker:
        critical = self._zone_max_c.get(zone, self._critical_c)
        warn = critical - (self._critical_c - self._warn_c)
        return LevelTracker(warn, critical, self._clear_c, self._for_s)
