"""Thermal thresholds per zone, with hysteresis: what turns a stream of
temperatures into a few ``ThermalChanged`` events.

A zone's level goes up (normal -> warn -> critical) as soon as a reading
reaches that level's threshold, and comes down only once a reading is
``hysteresis_c`` below the threshold it had crossed, so a zone hovering at a
threshold reports once instead of on every sample. Zones start ``normal``.
"""

from __future__ import annotations

import logging

from edgebox.events import ThermalChanged
from edgebox.telemetry.sample import TelemetrySample

log = logging.getLogger("edgebox.telemetry")

_RANK = {"normal": 0, "warn": 1, "critical": 2}


class ThermalGuard:
    """Fed by the sampler thread alone; ``levels`` may be read from any
    thread (it returns a copy)."""

    def __init__(self, warn_c: float, critical_c: float, hysteresis_c: float) -> None:
        if not warn_c < critical_c:
            raise ValueError(
                f"thermal guard: expected warn_c ({warn_c}) < critical_c ({critical_c})"
            )
        if hysteresis_c < 0:
            raise ValueError(f"thermal guard: expected hysteresis_c >= 0, got {hysteresis_c}")
        self.warn_c = warn_c
        self.critical_c = critical_c
        self.hysteresis_c = hysteresis_c
        self._levels: dict[str, str] = {}

    def levels(self) -> dict[str, str]:
        """Each zone seen so far -> its level now."""
        return dict(self._levels)

    def feed(self, sample: TelemetrySample) -> list[ThermalChanged]:
        """The level changes this sample causes, one per zone at most (a jump
        from normal past both thresholds is one ``critical``). Each is
        logged: a warning going up to warn, an error to critical, info on the
        way down."""
        events = []
        for zone, temperature in sample.temperatures_c.items():
            before = self._levels.get(zone, "normal")
            after, threshold = self._next(before, temperature)
            self._levels[zone] = after
            if after == before:
                continue
            events.append(ThermalChanged(zone, after, temperature, threshold, sample.timestamp))
            if _RANK[after] > _RANK[before]:
                level = logging.ERROR if after == "critical" else logging.WARNING
                how = f"reached {threshold:.1f} °C"
            else:
                level = logging.INFO
                how = f"back below {threshold - self.hysteresis_c:.1f} °C"
            log.log(
                level,
                "thermal: zone '%s' is %s at %.1f °C (%s)",
                zone,
                after,
                temperature,
                how,
            )
        return events

    def _next(self, level: str, temperature: float) -> tuple[str, float]:
        """The zone's level after ``temperature``, and the threshold crossed."""
        if temperature >= self.critical_c:
            rising = ("critical", self.critical_c)
        elif temperature >= self.warn_c:
            rising = ("warn", self.warn_c)
        else:
            rising = ("normal", self.warn_c)
        if _RANK[rising[0]] >= _RANK[level]:
            return rising if _RANK[rising[0]] > _RANK[level] else (level, rising[1])
        if level == "critical" and temperature >= self.critical_c - self.hysteresis_c:
            return level, self.critical_c
        if temperature >= self.warn_c - self.hysteresis_c:
            return ("warn", self.critical_c) if level == "critical" else (level, self.warn_c)
        return "normal", self.warn_c
