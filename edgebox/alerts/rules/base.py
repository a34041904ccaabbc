"""What every rule is to the evaluator, and what it is given to judge."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from edgebox.alerts.alert import Finding
from edgebox.mqtt.link_stats import MqttStats
from edgebox.telemetry.sample import TelemetrySample

MAX_SUBJECTS = 256
"""Most subjects a rule remembers (models, streams, zones); past it the one
seen longest ago is forgotten, so a storm of names cannot grow the daemon."""

V = TypeVar("V")


@dataclass(frozen=True)
class Inputs:
    """What the daemon already measured, read once per judgement."""

    sample: TelemetrySample | None = None
    """The latest telemetry sample; None before the first or with telemetry off."""
    mqtt: MqttStats | None = None
    """The MQTT link's figures; None when MQTT is off."""


class Rule(Protocol):
    """Called by the evaluator's thread alone, so a rule needs no lock.
    ``now`` is monotonic seconds (durations), never the wall clock."""

    name: ClassVar[str]
    EVENTS: ClassVar[tuple[type, ...]]
    """The bus events ``observe`` wants; () for a rule that only reads ``Inputs``."""

    def observe(self, event: Any, now: float) -> None: ...

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        """Subject -> finding for every subject that should be alerted now;
        a subject left out clears."""
        ...


def remember(subjects: MutableMapping[str, V], subject: str, value: V) -> None:
    """Sets ``subject`` as the newest entry, forgetting the oldest past ``MAX_SUBJECTS``."""
    subjects.pop(subject, None)
    subjects[subject] = value
    while len(subjects) > MAX_SUBJECTS:
        del subjects[next(iter(subjects))]
