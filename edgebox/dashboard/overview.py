"""The overview's device block: what telemetry knows about the module, and
what the daemon knows about itself."""

from __future__ import annotations

import socket
import time
from typing import Any

from edgebox import __version__
from edgebox.dashboard.deps import TelemetrySource
from edgebox.telemetry.sample import TelemetrySample

PROC_UPTIME = "/proc/uptime"


def device_document(
    telemetry: TelemetrySource | None,
    latest: TelemetrySample | None,
    started_at: float,
    proc_uptime: str = PROC_UPTIME,
) -> dict[str, Any]:
    """Unknown fields are None (no telemetry: model, L4T, JetPack, power mode)."""
    device = telemetry.device if telemetry is not None else None
    return {
        "model": device.model if device is not None else None,
        "l4t": device.l4t if device is not None else None,
        "jetpack": device.jetpack if device is not None else None,
        "power_mode": latest.nvpmodel if latest is not None else None,
        "uptime_s": machine_uptime_s(proc_uptime),
        "edgebox_version": __version__,
        "edgebox_uptime_s": round(time.monotonic() - started_at, 1),
        "hostname": socket.gethostname(),
    }


def machine_uptime_s(path: str = PROC_UPTIME) -> float | None:
    try:
        with open(path, encoding="ascii") as file:
            return float(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
