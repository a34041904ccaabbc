"""Telemetry snapshots for the MQTT tests, as the psutil source sends them on a
machine that is not a Jetson: CPU and memory, every Jetson reading empty."""

from __future__ import annotations

from edgebox.events import TelemetrySnapshot


def fake_psutil_snapshot(**fields) -> TelemetrySnapshot:
    """A one-core psutil snapshot; ``fields`` replace any of its values."""
    values = {
        "source": "psutil",
        "cpu_pct": 3.0,
        "cpu_per_core_pct": (3.0,),
        "memory_used_bytes": 1,
        "memory_total_bytes": 2,
        "gpu": None,
        "emc_pct": None,
        "temperatures_c": {},
        "power": {},
        "total_power_mw": None,
        "fan_pct": None,
        "nvpmodel": None,
        "nvpmodel_id": None,
        "jetson_clocks": None,
        "engines": {},
        "timestamp": 1.0,
    }
    return TelemetrySnapshot(**(values | fields))
