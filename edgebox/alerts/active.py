"""The active alerts, and the events that changing them makes.

A rule's findings replace its part of the set at every judgement: a new
subject is raised, a severity change is raised again (same ``since``), a
subject no longer found is cleared. A message that only changes its figures
(a temperature read again) updates the set without an event.
"""

from __future__ import annotations

import logging
import threading

from edgebox.alerts.alert import SEVERITY_RANK, Alert, Finding
from edgebox.events import AlertEvent

log = logging.getLogger("edgebox.alerts")

MAX_ACTIVE = 256
"""Most alerts active at once; past it new ones are counted in ``refused``
and logged, never kept, so the banner and memory stay bounded."""


class ActiveAlerts:
    """Changed by the evaluator's thread (``apply``), read by any thread
    (``snapshot``, the dashboard and metrics)."""

    def __init__(self, max_active: int = MAX_ACTIVE) -> None:
        self._max_active = max_active
        self._alerts: dict[tuple[str, str], Alert] = {}
        self._lock = threading.Lock()
        self.refused = 0
        """Alerts not raised because ``max_active`` were already active."""

    def apply(self, rule: str, findings: dict[str, Finding], wall_now: float) -> list[AlertEvent]:
        """``rule``'s findings now; the raise and clear events they make, in order."""
        events = []
        with self._lock:
            for key in [k for k in self._alerts if k[0] == rule and k[1] not in findings]:
                alert = self._alerts.pop(key)
                events.append(self._event("cleared", alert, wall_now))
            for subject, finding in findings.items():
                key = (rule, subject)
                before = self._alerts.get(key)
                if before is None and len(self._alerts) >= self._max_active:
                    self.refused += 1
                    if self.refused == 1 or self.refused % 100 == 0:
                        log.error(
                            "alerts: %d already active; not raising %s '%s' (%d refused)",
                            self._max_active,
                            rule,
                            subject,
                            self.refused,
                        )
                    continue
                since = before.since if before is not None else wall_now
                alert = Alert(rule, subject, finding.severity, finding.message, since)
                self._alerts[key] = alert
                if before is None or before.severity != finding.severity:
                    events.append(self._event("raised", alert, wall_now))
        for event in events:
            level = logging.INFO if event.state == "cleared" else _LOG_LEVEL[event.severity]
            log.log(level, "alert %s: %s '%s': %s", event.state, rule, event.subject, event.message)
        return events

    def snapshot(self) -> list[Alert]:
        """Critical first, then the oldest first."""
        with self._lock:
            alerts = list(self._alerts.values())
        return sorted(alerts, key=lambda a: (-SEVERITY_RANK[a.severity], a.since, a.rule))

    @staticmethod
    def _event(state: str, alert: Alert, wall_now: float) -> AlertEvent:
        return AlertEvent(
            state,
            alert.rule,
            alert.severity,
            alert.subject,
            alert.message,
            alert.since,
            wall_now,
        )


_LOG_LEVEL = {"warn": logging.WARNING, "critical": logging.ERROR}
