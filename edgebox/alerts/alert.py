"""What a rule says about one subject, and what the active set keeps of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEVERITY_RANK = {"warn": 1, "critical": 2}


@dataclass(frozen=True)
class Finding:
    """A rule's verdict on one subject at one judgement: it should be alerted,
    at this severity, with this message (the message may change with every
    reading without the alert being raised again)."""

    severity: str
    message: str


@dataclass(frozen=True)
class Alert:
    """An active alert as the dashboard's ``/api/v1/alerts`` lists it."""

    rule: str
    subject: str
    severity: str
    message: str
    since: float
    """Wall-clock time it was raised, seconds since the epoch."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "subject": self.subject,
            "severity": self.severity,
            "message": self.message,
            "since": self.since,
        }
