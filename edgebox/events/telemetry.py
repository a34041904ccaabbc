"""A telemetry reading as published to MQTT ``{prefix}/{device}/telemetry``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.events.event import Event


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {key: _round(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(item) for item in value]
    return value


@dataclass(frozen=True)
class TelemetrySnapshot(Event):
    """One telemetry sample, published by the telemetry thread every
    ``telemetry.mqtt_interval_s``. Its fields are the sample's
    (edgebox/telemetry/sample.py), the nested ones as plain mappings; a
    figure the source cannot know is null, never 0 (``gpu`` null: no GPU)."""

    SCHEMA: ClassVar[str] = "edgebox.telemetry"

    source: str
    """``jtop``, ``sysfs`` or ``psutil``."""
    cpu_pct: float | None
    cpu_per_core_pct: tuple[float | None, ...]
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    gpu: dict[str, Any] | None
    """``load_pct``, ``freq_mhz``, ``memory_used_bytes`` (null on a Jetson: shared RAM)."""
    emc_pct: float | None
    temperatures_c: dict[str, float]
    power: dict[str, dict[str, float | None]]
    """Rail -> ``voltage_mv``, ``current_ma``, ``power_mw``."""
    total_power_mw: float | None
    fan_pct: float | None
    nvpmodel: str | None
    nvpmodel_id: int | None
    jetson_clocks: bool | None
    engines: dict[str, dict[str, Any]]
    """Engine -> ``online``, ``freq_mhz``."""
    timestamp: float
    """When the sample was taken, wall-clock seconds since the epoch."""
    cpu_freq_mhz: tuple[float | None, ...] = ()
    """Each core's clock, in core order; null where unknown."""
    emc_freq_mhz: float | None = None

    def _rounded(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Floats to 0.01 (sensors are not more precise), lists as lists."""
        timestamp = fields["timestamp"]
        return {**_round(fields), "timestamp": timestamp}
