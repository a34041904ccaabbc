"""A reading against two thresholds, with a clear margin and a hold time:
what keeps a value hovering at a threshold from raising and clearing an
alert on every sample.

Going up, a level is reached once readings have stayed at or above its
threshold for ``for_s`` seconds in a row. Going down, a level is left only
once a reading is ``clear`` below its threshold (critical drops to warn,
warn to none), at once: the margin already filters the noise.
"""

from __future__ import annotations

import math

from edgebox.alerts.alert import SEVERITY_RANK


class LevelTracker:
    """One subject's level (None, ``warn`` or ``critical``); fed by one thread."""

    def __init__(self, warn: float, critical: float, clear: float, for_s: float) -> None:
        """``critical`` may be ``math.inf``: a rule with a warn level only."""
        if not warn < critical:
            raise ValueError(f"level tracker: expected warn ({warn}) < critical ({critical})")
        self.thresholds = {"warn": warn, "critical": critical}
        self.clear = clear
        self.for_s = for_s
        self.level: str | None = None
        self._reached_at: dict[str, float] = {}
        """Level -> when readings reached its threshold, while they stay there."""

    def feed(self, value: float, now: float) -> str | None:
        """The level after ``value`` read at ``now`` (seconds, monotonic)."""
        for name, threshold in self.thresholds.items():
            if value >= threshold:
                self._reached_at.setdefault(name, now)
            else:
                self._reached_at.pop(name, None)
        level = self.level
        if level == "critical" and value < self.thresholds["critical"] - self.clear:
            level = "warn"
        if level == "warn" and value < self.thresholds["warn"] - self.clear:
            level = None
        for name in ("critical", "warn"):
            reached = self._reached_at.get(name)
            held = reached is not None and now - reached >= self.for_s
            if held and SEVERITY_RANK[name] > SEVERITY_RANK.get(level or "", 0):
                level = name
                break
        self.level = level
        return level

    def describe(self) -> str:
        """The thresholds as a message shows them."""
        warn, critical = self.thresholds["warn"], self.thresholds["critical"]
        if math.isinf(critical):
            return f"threshold {warn:g}"
        return f"warn {warn:g}, critical {critical:g}"
