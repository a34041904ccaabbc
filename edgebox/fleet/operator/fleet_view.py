"""What the broker says about a group's devices: their retained reported
state (``{prefix}/{device}/fleet``) and status (``{prefix}/{device}/status``).

Reports come from devices, not from the operator, so they are read
leniently: a field of the wrong type reads as unknown rather than stopping a
deploy, and a report that is not JSON at all leaves the device out, as one
that never reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from edgebox.fleet.document import REPORTED_SCHEMA


@dataclass(frozen=True)
class ModelReport:
    state: str = ""
    version: int | None = None
    served: tuple[int, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class DeviceView:
    device: str
    group: str
    generation: int = 0
    at: float | None = None
    models: dict[str, ModelReport] = field(default_factory=dict)
    refused: dict | None = None
    status: str = "unknown"
    """``online``, ``offline`` (the last will or a shutdown) or ``unknown``
    (no retained status)."""

    def model(self, name: str) -> ModelReport:
        return self.models.get(name, ModelReport())

    def as_dict(self) -> dict:
        return {
            "device": self.device,
            "group": self.group,
            "status": self.status,
            "generation": self.generation,
            "at": self.at,
            "models": {
                name: {
                    "state": report.state,
                    "version": report.version,
                    "served": list(report.served),
                    "reason": report.reason,
                }
                for name, report in sorted(self.models.items())
            },
            "refused": self.refused,
        }


class FleetTopics:
    """The topic filters the operator subscribes to, and which device a topic
    names."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.reports = f"{prefix}/+/fleet"
        self.statuses = f"{prefix}/+/status"

    def device_of(self, topic: str, leaf: str) -> str | None:
        """The device level of ``{prefix}/{device}/{leaf}``; None for any other topic."""
        start = self.prefix + "/"
        if not topic.startswith(start):
            return None
        parts = topic[len(start) :].split("/")
        return parts[0] if len(parts) == 2 and parts[1] == leaf and parts[0] else None


def group_view(retained: dict[str, bytes], topics: FleetTopics, group: str) -> list[DeviceView]:
    """The devices whose report says they are in ``group``, by device id;
    their status joined in."""
    statuses: dict[str, str] = {}
    reports: dict[str, DeviceView] = {}
    for topic, payload in retained.items():
        device = topics.device_of(topic, "status")
        if device is not None:
            statuses[device] = _status(payload)
            continue
        device = topics.device_of(topic, "fleet")
        if device is not None:
            view = _report(device, payload)
            if view is not None and view.group == group:
                reports[device] = view
    joined = [
        replace(view, status=statuses.get(level, "unknown")) for level, view in reports.items()
    ]
    return sorted(joined, key=lambda view: view.device)


def _status(payload: bytes) -> str:
    try:
        state = json.loads(payload).get("state")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return "unknown"
    return state if state in ("online", "offline") else "unknown"


def _report(topic_device: str, payload: bytes) -> DeviceView | None:
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or body.get("schema") != REPORTED_SCHEMA:
        return None
    device = body.get("device")
    group = body.get("group")
    if not isinstance(group, str):
        return None
    models = body.get("models")
    refused = body.get("refused")
    return DeviceView(
        device=device if isinstance(device, str) and device else topic_device,
        group=group,
        generation=_integer(body.get("generation")) or 0,
        at=_number(body.get("at")),
        models={
            name: _model(entry)
            for name, entry in (models.items() if isinstance(models, dict) else ())
            if isinstance(name, str)
        },
        refused=refused if isinstance(refused, dict) else None,
    )


def _model(entry: object) -> ModelReport:
    if not isinstance(entry, dict):
        return ModelReport()
    state = entry.get("state")
    reason = entry.get("reason")
    served = entry.get("served")
    return ModelReport(
        state=state if isinstance(state, str) else "",
        version=_integer(entry.get("version")),
        served=tuple(v for v in served if _integer(v) is not None)
        if isinstance(served, list)
        else (),
        reason=reason if isinstance(reason, str) else "",
    )


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
