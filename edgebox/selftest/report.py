"""A self-test's findings and how they are shown: a line per check on the
terminal, or one JSON document (``--json``) for support and scripts."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


class Status(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    ABSENT = "not on this machine"
    SKIPPED = "not configured"


@dataclass(frozen=True)
class Check:
    section: str
    name: str
    status: Status
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)
    """What the check read (versions, paths, sizes), for the JSON report."""


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    def add(self, *checks: Check) -> None:
        self.checks.extend(checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status is Status.FAIL]

    def to_json(self) -> str:
        return json.dumps(
            {
                "ok": not self.failed,
                "checks": [
                    {
                        "section": c.section,
                        "name": c.name,
                        "status": c.status.value,
                        "detail": c.detail,
                        "facts": c.facts,
                    }
                    for c in self.checks
                ],
            },
            indent=2,
            default=str,
        )

    def to_text(self) -> str:
        width = max((len(c.name) for c in self.checks), default=0)
        lines: list[str] = []
        section = None
        for check in self.checks:
            if check.section != section:
                if lines:
                    lines.append("")
                section = check.section
                lines.append(section)
            mark = "ok" if check.status is Status.PASS else check.status.value.upper()
            lines.append(f"  {check.name:<{width}}  {mark:<20}{check.detail}")
        lines += ["", f"{len(self.checks)} checks, {len(self.failed)} failed"]
        return "\n".join(lines)
