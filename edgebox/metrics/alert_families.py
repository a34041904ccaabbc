"""``edgebox_alerts_active{rule,severity}``: how many alerts are active, from
the alert evaluator's active set at scrape time (docs/metrics.md). Every
rule switched on has a series per severity, 0 when none, so an alert that
clears drops to 0 instead of going stale."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from edgebox.alerts.alert import SEVERITY_RANK, Alert


class AlertSource(Protocol):
    """What ``edgebox.alerts.evaluator.AlertEvaluator`` offers (thread-safe)."""

    @property
    def rules(self) -> tuple[str, ...]: ...

    def snapshot(self) -> Sequence[Alert]: ...


def alert_families(source: AlertSource) -> Iterator[Metric]:
    counts = {(rule, severity): 0 for rule in source.rules for severity in SEVERITY_RANK}
    for alert in source.snapshot():
        key = (alert.rule, alert.severity)
        counts[key] = counts.get(key, 0) + 1
    active = GaugeMetricFamily(
        "edgebox_alerts_active",
        "Alerts active now, by rule and severity (the dashboard's banner)",
        labels=["rule", "severity"],
    )
    for (rule, severity), count in counts.items():
        active.add_metric([rule, severity], count)
    yield active
