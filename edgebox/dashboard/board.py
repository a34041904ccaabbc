"""The Board page's document (``/api/v1/board``): what jtop's screens show,
from the latest telemetry sample and the device's fixed facts. A figure the
source cannot know stays null (the page shows "—"), never 0."""

from __future__ import annotations

import dataclasses
from typing import Any

from edgebox.dashboard.deps import TelemetrySource


def board_document(telemetry: TelemetrySource | None) -> dict[str, Any]:
    """``sample`` is null until the sampler's first reading, ``device`` when
    telemetry is off (``reason`` says which)."""
    if telemetry is None:
        return {"device": None, "sample": None, "reason": "telemetry off"}
    latest = telemetry.latest()
    return {
        "device": dataclasses.asdict(telemetry.device),
        "sample": latest.as_dict() if latest is not None else None,
        "reason": "" if latest is not None else "no telemetry sample yet",
    }
