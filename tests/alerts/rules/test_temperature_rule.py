"""``temperature``: a zone past the alert thresholds raises, warn then
critical, and clears ``temperature_clear_c`` below."""

from __future__ import annotations

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.temperature import TemperatureRule
from edgebox.telemetry.sample import TelemetrySample


def temperatures(**zones: float) -> Inputs:
    return Inputs(
        sample=TelemetrySample(timestamp=0.0, source="sysfs", cpu_pct=None, temperatures_c=zones)
    )


def severities(rule: TemperatureRule, inputs: Inputs, now: float = 0.0) -> dict[str, str]:
    return {zone: finding.severity for zone, finding in rule.findings(inputs, now).items()}


def test_a_hot_zone_raises_warn_then_critical_and_clears_below_the_margin():
    rule = TemperatureRule(80, 90, 3, 0)
    assert severities(rule, temperatures(gpu=60, cpu=50)) == {}
    assert severities(rule, temperatures(gpu=82, cpu=50)) == {"gpu": "warn"}
    assert severities(rule, temperatures(gpu=91, cpu=50)) == {"gpu": "critical"}
    assert severities(rule, temperatures(gpu=88, cpu=50)) == {"gpu": "critical"}
    assert severities(rule, temperatures(gpu=86, cpu=50)) == {"gpu": "warn"}
    assert severities(rule, temperatures(gpu=78, cpu=50)) == {"gpu": "warn"}
    assert severities(rule, temperatures(gpu=76, cpu=50)) == {}


def test_the_message_names_the_zone_its_reading_and_the_thresholds():
    rule = TemperatureRule(80, 90, 3, 0)
    assert rule.findings(temperatures(tj=92.04), 0.0) == {
        "tj": Finding("critical", "zone 'tj' at 92.0 °C (warn 80, critical 90 °C)")
    }


def test_a_zone_limit_moves_both_thresholds_for_that_zone_only():
    rule = TemperatureRule(80, 90, 3, 0, zone_max_c={"cv0": 70})
    assert severities(rule, temperatures(cv0=61, gpu=61)) == {"cv0": "warn"}
    assert severities(rule, temperatures(cv0=71, gpu=71)) == {"cv0": "critical"}


def test_a_zone_missing_from_a_sample_keeps_its_level():
    rule = TemperatureRule(80, 90, 3, 0)
    assert severities(rule, temperatures(gpu=85)) == {"gpu": "warn"}
    assert severities(rule, temperatures(cpu=40)) == {"gpu": "warn"}
    assert severities(rule, Inputs()) == {"gpu": "warn"}


def test_the_hold_time_waits_before_raising():
    rule = TemperatureRule(80, 90, 3, for_s=5)
    assert severities(rule, temperatures(gpu=85), now=0) == {}
    assert severities(rule, temperatures(gpu=85), now=4) == {}
    assert severities(rule, temperatures(gpu=85), now=5) == {"gpu": "warn"}
