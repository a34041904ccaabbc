"""The active set: findings in, raise and clear events out; a new reading
alone makes no event (edgebox/alerts/active.py)."""

from __future__ import annotations

from edgebox.alerts.active import ActiveAlerts
from edgebox.alerts.alert import Alert, Finding


def states(events) -> list[tuple[str, str, str]]:
    return [(e.state, e.subject, e.severity) for e in events]


def test_a_new_finding_raises_and_a_missing_one_clears():
    active = ActiveAlerts()
    events = active.apply("temperature", {"gpu": Finding("warn", "82 °C")}, 10.0)
    assert states(events) == [("raised", "gpu", "warn")]
    assert (events[0].rule, events[0].message, events[0].since) == ("temperature", "82 °C", 10.0)
    events = active.apply("temperature", {}, 20.0)
    assert states(events) == [("cleared", "gpu", "warn")]
    assert (events[0].since, events[0].timestamp) == (10.0, 20.0)
    assert active.snapshot() == []


def test_a_new_message_updates_silently_and_a_new_severity_raises_again_with_its_since():
    active = ActiveAlerts()
    active.apply("temperature", {"gpu": Finding("warn", "82 °C")}, 10.0)
    assert active.apply("temperature", {"gpu": Finding("warn", "83 °C")}, 11.0) == []
    assert active.snapshot() == [Alert("temperature", "gpu", "warn", "83 °C", 10.0)]
    events = active.apply("temperature", {"gpu": Finding("critical", "91 °C")}, 12.0)
    assert states(events) == [("raised", "gpu", "critical")]
    assert events[0].since == 10.0


def test_rules_clear_only_their_own_alerts():
    active = ActiveAlerts()
    active.apply("temperature", {"gpu": Finding("warn", "")}, 1.0)
    active.apply("throttling", {"gpu": Finding("critical", "")}, 2.0)
    assert states(active.apply("temperature", {}, 3.0)) == [("cleared", "gpu", "warn")]
    assert [(a.rule, a.subject) for a in active.snapshot()] == [("throttling", "gpu")]


def test_the_snapshot_lists_critical_first_then_the_oldest():
    active = ActiveAlerts()
    active.apply("memory", {"memory": Finding("warn", "")}, 1.0)
    active.apply("stream_down", {"road": Finding("warn", "")}, 0.5)
    active.apply("model_unavailable", {"lane:2": Finding("critical", "")}, 3.0)
    assert [a.subject for a in active.snapshot()] == ["lane:2", "road", "memory"]


def test_past_the_bound_new_alerts_are_refused_and_counted():
    active = ActiveAlerts(max_active=2)
    findings = {name: Finding("warn", "") for name in ("a", "b", "c")}
    assert states(active.apply("stream_down", findings, 1.0)) == [
        ("raised", "a", "warn"),
        ("raised", "b", "warn"),
    ]
    assert (len(active.snapshot()), active.refused) == (2, 1)
