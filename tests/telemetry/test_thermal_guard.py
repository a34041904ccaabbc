"""The thermal guard reports a zone's level changes once each: up as soon as
a threshold is reached, down only after the hysteresis, per zone."""

from __future__ import annotations

import pytest

from edgebox.events import ThermalChanged
from edgebox.telemetry.sample import TelemetrySample
from edgebox.telemetry.thermal_guard import ThermalGuard


def sample(timestamp: float = 1.0, **temperatures: float) -> TelemetrySample:
    return TelemetrySample(
        timestamp=timestamp, source="sysfs", cpu_pct=None, temperatures_c=temperatures
    )


def changes(
    guard: ThermalGuard, *readings: float, zone: str = "tj"
) -> list[tuple[str, float, float]]:
    events = []
    for index, reading in enumerate(readings):
        events += guard.feed(sample(float(index), **{zone: reading}))
    return [(e.level, e.temperature_c, e.threshold_c) for e in events]


def test_a_reading_hovering_at_the_warn_threshold_reports_once():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    assert changes(guard, 84.9, 85.0, 84.5, 85.5, 84.0, 85.0, 81.0, 85.2) == [("warn", 85.0, 85.0)]


def test_recovery_is_reported_only_after_dropping_the_hysteresis_below():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    assert changes(guard, 86.0, 80.5, 80.0, 79.9, 70.0) == [
        ("warn", 86.0, 85.0),
        ("normal", 79.9, 85.0),
    ]


def test_critical_then_back_to_warn_then_normal():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    assert changes(guard, 96.0, 94.0, 89.5, 84.0, 79.0) == [
        ("critical", 96.0, 95.0),
        ("warn", 89.5, 95.0),
        ("normal", 79.0, 85.0),
    ]


def test_a_jump_past_both_thresholds_reports_critical_alone():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    assert changes(guard, 40.0, 99.0, 20.0) == [("critical", 99.0, 95.0), ("normal", 20.0, 85.0)]


def test_zones_are_tracked_apart_and_the_event_names_its_zone():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    first = guard.feed(sample(10.0, gpu=86.0, cpu=60.0))
    second = guard.feed(sample(11.0, gpu=86.0, cpu=96.0))
    assert first == [ThermalChanged("gpu", "warn", 86.0, 85.0, 10.0)]
    assert second == [ThermalChanged("cpu", "critical", 96.0, 95.0, 11.0)]
    assert guard.levels() == {"gpu": "warn", "cpu": "critical"}


def test_zones_start_normal_so_a_cool_start_reports_nothing():
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    assert guard.feed(sample(cpu=45.0, gpu=44.0)) == []
    assert guard.levels() == {"cpu": "normal", "gpu": "normal"}


def test_thresholds_must_be_ordered():
    with pytest.raises(
        ValueError, match=r"thermal guard: expected warn_c \(95.0\) < critical_c \(85.0\)"
    ):
        ThermalGuard(warn_c=95.0, critical_c=85.0, hysteresis_c=5.0)
