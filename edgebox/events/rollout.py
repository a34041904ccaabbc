"""A new model version's rollout: started, progress, promoted, rejected,
rolled back; and a version quarantined because the daemon died while it ran
(docs/rollout.md). One schema per kind, so a subscriber to MQTT ``events``
can match on the name alone."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from edgebox.events.event import Event


@dataclass(frozen=True)
class RolloutEvent(Event):
    """Published from the thread that decided (a load, the rollout thread, an
    operator's request). Latencies are milliseconds, None until measured."""

    model: str
    version: int
    """The new version."""
    serving_version: int | None
    """The version that serves while the new one proves itself."""
    policy: str
    """``shadow`` or ``canary``."""
    samples: int
    samples_wanted: int
    agreement: float | None
    """Share of compared answers that agreed (shadow); None for a canary or before any."""
    candidate_p95_ms: float | None
    serving_p95_ms: float | None
    errors: int
    dropped: int
    """Shadow copies left out because the new version was busy."""
    reason: str = ""
    timestamp: float = field(default_factory=time.time)

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        for key in ("agreement", "candidate_p95_ms", "serving_p95_ms"):
            if fields[key] is not None:
                fields[key] = round(fields[key], 4)
        return fields


@dataclass(frozen=True)
class RolloutStarted(RolloutEvent):
    SCHEMA: ClassVar[str] = "edgebox.rollout.started"


@dataclass(frozen=True)
class RolloutProgress(RolloutEvent):
    """At most one every few seconds per rollout."""

    SCHEMA: ClassVar[str] = "edgebox.rollout.progress"


@dataclass(frozen=True)
class RolloutPromoted(RolloutEvent):
    SCHEMA: ClassVar[str] = "edgebox.rollout.promoted"


@dataclass(frozen=True)
class RolloutRejected(RolloutEvent):
    """A gate failed (``reason`` says which, by how much) or an operator aborted."""

    SCHEMA: ClassVar[str] = "edgebox.rollout.rejected"


@dataclass(frozen=True)
class RolloutRolledBack(RolloutEvent):
    """A promoted version broke a gate during its watch window; the previous
    version serves again."""

    SCHEMA: ClassVar[str] = "edgebox.rollout.rolled_back"


@dataclass(frozen=True)
class ModelQuarantined(Event):
    """The daemon died while this version was loading or running; it is not
    served again until its files change or an operator releases it."""

    SCHEMA: ClassVar[str] = "edgebox.model.quarantined"

    model: str
    version: int
    reason: str
    timestamp: float = field(default_factory=time.time)
