"""``spool``: the MQTT spool past ``spool_warn_pct`` of its cap raises; it
clears ``spool_clear_pct`` points lower."""

from __future__ import annotations

import pytest

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.spool_fill import SpoolFillRule
from edgebox.mqtt.link_stats import MqttStats

CAPACITY = 64 * 1024 * 1024


def spool(pct: float, rows: int = 1000) -> Inputs:
    used = int(CAPACITY * pct / 100)
    return Inputs(mqtt=MqttStats("disconnected", "b", spool_rows=rows, spool_bytes=used))


def test_a_filling_spool_raises_and_clears_only_well_below():
    rule = SpoolFillRule(80, 10, CAPACITY)
    assert rule.findings(spool(79), 0) == {}
    (finding,) = rule.findings(spool(81, rows=4321), 1).values()
    assert (finding.severity, finding.message) == (
        "warn",
        "MQTT spool 81 % full (4321 unsent messages; threshold 80 %)",
    )
    assert list(rule.findings(spool(71), 2)) == ["mqtt spool"]
    assert rule.findings(spool(69), 3) == {}


def test_a_spool_without_a_capacity_is_refused():
    with pytest.raises(ValueError, match="expected capacity_bytes > 0, got 0"):
        SpoolFillRule(80, 10, 0)
