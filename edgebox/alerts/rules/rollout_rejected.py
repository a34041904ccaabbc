"""``rollout_rejected``: a new version's rollout was rejected by a gate or an
operator, or rolled back after promotion. It stays on the banner until the
model's next rollout starts or is promoted, or for
``alerts.rollout_rejected_clear_after_s`` (0: until then)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs, remember
from edgebox.events import RolloutPromoted, RolloutRejected, RolloutRolledBack, RolloutStarted


@dataclass(frozen=True)
class _Rejection:
    at: float
    event: RolloutRejected | RolloutRolledBack


class RolloutRejectedRule:
    name: ClassVar[str] = "rollout_rejected"
    EVENTS: ClassVar[tuple[type, ...]] = (
        RolloutRejected,
        RolloutRolledBack,
        RolloutStarted,
        RolloutPromoted,
    )

    def __init__(self, clear_after_s: float) -> None:
        self._clear_after_s = clear_after_s
        self._rejected: dict[str, _Rejection] = {}

    def observe(self, event: Any, now: float) -> None:
        if isinstance(event, (RolloutRejected, RolloutRolledBack)):
            remember(self._rejected, event.model, _Rejection(now, event))
        elif isinstance(event, (RolloutStarted, RolloutPromoted)):
            self._rejected.pop(event.model, None)

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        if self._clear_after_s > 0:
            expired = [m for m, r in self._rejected.items() if now - r.at >= self._clear_after_s]
            for model in expired:
                del self._rejected[model]
        found = {}
        for model, rejection in self._rejected.items():
            event = rejection.event
            how = "rolled back" if isinstance(event, RolloutRolledBack) else "rejected"
            reason = f": {event.reason}" if event.reason else ""
            message = f"model '{model}' version {event.version} {how}{reason}"
            found[model] = Finding("warn", message)
        return found
