"""``spool``: the MQTT spool past ``alerts.spool_warn_pct`` of its cap: the
broker has been out of reach long enough that, at 100 %, results are dropped
(oldest first). It clears ``spool_clear_pct`` points lower."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.level import LevelTracker
from edgebox.alerts.rules.base import Inputs

SUBJECT = "mqtt spool"


class SpoolFillRule:
    name: ClassVar[str] = "spool"
    EVENTS: ClassVar[tuple[type, ...]] = ()

    def __init__(self, warn_pct: float, clear_pct: float, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"spool rule: expected capacity_bytes > 0, got {capacity_bytes}")
        self._tracker = LevelTracker(warn_pct, math.inf, clear_pct, 0.0)
        self._capacity_bytes = capacity_bytes
        self._last_pct = 0.0

    def observe(self, event: Any, now: float) -> None:
        pass

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        if inputs.mqtt is not None:
            self._last_pct = 100.0 * inputs.mqtt.spool_bytes / self._capacity_bytes
            self._tracker.feed(self._last_pct, now)
        if self._tracker.level is None:
            return {}
        rows = inputs.mqtt.spool_rows if inputs.mqtt is not None else 0
        message = (
            f"MQTT spool {self._last_pct:.0f} % full ({rows} unsent messages; "
            f"{self._tracker.describe()} %)"
        )
        return {SUBJECT: Finding("warn", message)}
