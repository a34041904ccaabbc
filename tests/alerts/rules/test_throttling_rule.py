"""``throttling``: raised while the thermal guard holds a zone critical,
cleared when the guard brings it down (its own hysteresis)."""

from __future__ import annotations

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.throttling import ThrottlingRule
from edgebox.events import ThermalChanged


def test_a_critical_zone_raises_and_the_guard_coming_down_clears():
    rule = ThrottlingRule()
    rule.observe(ThermalChanged("tj", "warn", 86.0, 85.0), 0.0)
    assert rule.findings(Inputs(), 0.0) == {}
    rule.observe(ThermalChanged("tj", "critical", 96.0, 95.0), 1.0)
    (finding,) = rule.findings(Inputs(), 1.0).values()
    assert finding.severity == "critical"
    assert finding.message == (
        "zone 'tj' reached 96.0 °C, past the thermal guard's 95 °C: "
        "the module may throttle its clocks"
    )
    rule.observe(ThermalChanged("tj", "warn", 89.0, 95.0), 2.0)
    assert rule.findings(Inputs(), 2.0) == {}


def test_zones_are_judged_apart():
    rule = ThrottlingRule()
    rule.observe(ThermalChanged("gpu", "critical", 97.0, 95.0), 0.0)
    rule.observe(ThermalChanged("cpu", "critical", 96.0, 95.0), 0.0)
    rule.observe(ThermalChanged("cpu", "normal", 70.0, 85.0), 0.0)
    assert list(rule.findings(Inputs(), 0.0)) == ["gpu"]
