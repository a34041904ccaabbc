"""``memory``: used RAM past the thresholds for the hold time raises; it
clears ``memory_clear_pct`` points below."""

from __future__ import annotations

from edgebox.alerts.rules.base import Inputs
from edgebox.alerts.rules.memory import MemoryRule
from edgebox.telemetry.sample import TelemetrySample

TOTAL = 8_000_000_000


def used(pct: float) -> Inputs:
    sample = TelemetrySample(
        timestamp=0.0,
        source="psutil",
        cpu_pct=None,
        memory_used_bytes=int(TOTAL * pct / 100),
        memory_total_bytes=TOTAL,
    )
    return Inputs(sample=sample)


def severity(rule: MemoryRule, inputs: Inputs, now: float) -> str | None:
    finding = rule.findings(inputs, now).get("memory")
    return finding.severity if finding else None


def test_memory_past_warn_for_the_hold_time_raises_then_escalates_and_clears():
    rule = MemoryRule(90, 97, 5, for_s=30)
    assert severity(rule, used(92), 0) is None
    assert severity(rule, used(92), 29) is None
    assert severity(rule, used(92), 30) == "warn"
    assert severity(rule, used(98), 31) == "warn"
    assert severity(rule, used(98), 61) == "critical"
    assert severity(rule, used(93), 62) == "critical"
    assert severity(rule, used(91), 63) == "warn"
    assert severity(rule, used(86), 64) == "warn"
    assert severity(rule, used(84), 65) is None


def test_a_peak_shorter_than_the_hold_time_is_no_alert():
    rule = MemoryRule(90, 97, 5, for_s=30)
    for now, pct in ((0, 99), (10, 99), (20, 50), (40, 99), (60, 99)):
        assert severity(rule, used(pct), now) is None


def test_the_message_gives_the_share_used():
    rule = MemoryRule(90, 97, 5, for_s=0)
    assert rule.findings(used(95.5), 0)["memory"].message == (
        "memory 95.5 % used (warn 90, critical 97 %)"
    )


def test_a_sample_without_memory_figures_changes_nothing():
    rule = MemoryRule(90, 97, 5, for_s=0)
    empty = Inputs(sample=TelemetrySample(timestamp=0.0, source="jtop", cpu_pct=None))
    assert rule.findings(empty, 0) == {}
    assert severity(rule, used(95), 1) == "warn"
    assert severity(rule, empty, 2) == "warn"
