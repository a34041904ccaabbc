"""``memory``: RAM used past ``alerts.memory_warn_pct`` / ``critical_pct`` for
``memory_for_s``; on a Jetson the GPU's memory is this RAM too."""

from __future__ import annotations

from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.level import LevelTracker
from edgebox.alerts.rules.base import Inputs

SUBJECT = "memory"


class MemoryRule:
    name: ClassVar[str] = "memory"
    EVENTS: ClassVar[tuple[type, ...]] = ()

    def __init__(
        self, warn_pct: float, critical_pct: float, clear_pct: float, for_s: float
    ) -> None:
        self._tracker = LevelTracker(warn_pct, critical_pct, clear_pct, for_s)
        self._last_pct = 0.0

    def observe(self, event: Any, now: float) -> None:
        pass

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        sample = inputs.sample
        if sample is not None and sample.memory_used_bytes is not None:
            total = sample.memory_total_bytes
            if total:
                self._last_pct = 100.0 * sample.memory_used_bytes / total
                self._tracker.feed(self._last_pct, now)
        level = self._tracker.level
        if level is None:
            return {}
        message = f"memory {self._last_pct:.1f} % used ({self._tracker.describe()} %)"
        return {SUBJECT: Finding(level, message)}
