"""An alert raised or cleared: a condition an operator should act on (a zone
too hot, a stream down, a model that failed to load), judged by
``edgebox/alerts/`` with hysteresis so it does not flap."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class AlertEvent(Event):
    """Published by the alert evaluator's thread when an alert is raised,
    changes severity (``raised`` again, same ``since``) or clears. One
    schema for both edges, so a subscriber keeps the active set by
    ``(rule, subject)``."""

    SCHEMA: ClassVar[str] = "edgebox.alert"
    STATES: ClassVar[tuple[str, ...]] = ("raised", "cleared")
    SEVERITIES: ClassVar[tuple[str, ...]] = ("warn", "critical")

    state: str
    """``raised`` (active from now on, or its severity changed) or ``cleared``."""
    rule: str
    """The rule that judged it: ``temperature``, ``throttling``, ``memory``,
    ``stream_down``, ``model_unavailable``, ``rollout_rejected``,
    ``mqtt_offline`` or ``spool``."""
    severity: str
    """``warn`` or ``critical``; a cleared alert keeps the last one it had."""
    subject: str
    """What it is about, unique within the rule: a zone, a stream, ``model:version``."""
    message: str
    since: float
    """Wall-clock time the alert was first raised, seconds since the epoch."""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.state not in self.STATES:
            raise ValueError(
                f"AlertEvent: expected state 'raised' or 'cleared', got '{self.state}'"
            )
        if self.severity not in self.SEVERITIES:
            raise ValueError(
                f"AlertEvent: expected severity 'warn' or 'critical', got '{self.severity}'"
            )
