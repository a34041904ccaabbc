"""The device's telemetry as named columns, and their means over a bucket.

A sample becomes a flat mapping: ``cpu_pct``, ``gpu_load_pct``,
``memory_used_bytes``, ``memory_total_bytes``, ``total_power_mw``, then one
``temperature_c.<zone>`` per thermal zone and one ``power_mw.<rail>`` per
power rail. A figure the source cannot know is left out (not 0), so a
machine without a GPU has no ``gpu_load_pct`` column at all. Zones and rails
are capped (``MAX_NAMED_COLUMNS`` each, first by name) so a source that
reports odd names cannot grow the record without bound.
"""

from __future__ import annotations

from collections.abc import Iterable

from edgebox.telemetry.sample import TelemetrySample

FIXED_COLUMNS: tuple[str, ...] = (
    "cpu_pct",
    "gpu_load_pct",
    "memory_used_bytes",
    "memory_total_bytes",
    "total_power_mw",
)
TEMPERATURE_PREFIX = "temperature_c."
POWER_PREFIX = "power_mw."
MAX_NAMED_COLUMNS = 16
"""Most thermal zones, and most power rails, kept per point."""
MAX_NAME_CHARS = 64


def device_columns(sample: TelemetrySample) -> dict[str, float]:
    values: dict[str, float | None] = {
        "cpu_pct": sample.cpu_pct,
        "gpu_load_pct": sample.gpu.load_pct if sample.gpu is not None else None,
        "memory_used_bytes": sample.memory_used_bytes,
        "memory_total_bytes": sample.memory_total_bytes,
        "total_power_mw": sample.total_power_mw,
    }
    for zone in sorted(sample.temperatures_c)[:MAX_NAMED_COLUMNS]:
        values[TEMPERATURE_PREFIX + zone[:MAX_NAME_CHARS]] = sample.temperatures_c[zone]
    for rail in sorted(sample.power)[:MAX_NAMED_COLUMNS]:
        values[POWER_PREFIX + rail[:MAX_NAME_CHARS]] = sample.power[rail].power_mw
    return {name: float(value) for name, value in values.items() if _number(value)}


def column_order(names: Iterable[str]) -> list[str]:
    """The fixed columns first (in their order), then zones, then rails, by name."""
    found = set(names)
    fixed = [name for name in FIXED_COLUMNS if name in found]
    return fixed + sorted(name for name in found if name not in FIXED_COLUMNS)


class DeviceMeans:
    """Sums and counts per column over a bucket's samples; ``means`` gives
    each column's mean (rounded to what a chart shows)."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def add(self, columns: dict[str, float]) -> None:
        for name, value in columns.items():
            self._sums[name] = self._sums.get(name, 0.0) + value
            self._counts[name] = self._counts.get(name, 0) + 1

    def merge(self, other: DeviceMeans) -> None:
        for name, total in other._sums.items():
            self._sums[name] = self._sums.get(name, 0.0) + total
            self._counts[name] = self._counts.get(name, 0) + other._counts[name]

    def __bool__(self) -> bool:
        return bool(self._counts)

    def means(self) -> dict[str, float]:
        return {
            name: _rounded(name, total / self._counts[name]) for name, total in self._sums.items()
        }


def _rounded(name: str, value: float) -> float:
    return float(round(value)) if name.endswith("_bytes") else round(value, 2)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
