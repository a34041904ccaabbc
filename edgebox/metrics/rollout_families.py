"""Prometheus families from the rollouts' status documents: where each model's
rollout stands, the figures of the one in progress, and how many samples and
outcomes its rollouts have had since the daemon started (docs/rollout.md).

Read at scrape time from ``Rollouts.status``, the very document the rollout
resource, the dashboard and the events show, so the three cannot disagree. A
model appears once it had a rollout, a watch window or an outcome since start
(``Rollouts.known``); the per-version gauges only while one is in progress
or watched, and a figure not measured yet (no agreement for a canary, no
latency before an answer) is left out rather than shown as 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

STAGES = {"none": 0, "shadow": 1, "canary": 2, "watching": 3}
"""``edgebox_rollout_state``'s values; a stage the code adds later reads -1
until it is given one here."""
OUTCOMES = ("promoted", "rejected", "rolled_back", "quarantined")
"""``edgebox_rollout_outcomes_total``'s ``result`` labels, each exported (0
included) for every known model so that ``increase()`` sees the first one."""


class RolloutSource(Protocol):
    """What ``edgebox.lifecycle.rollout.rollouts.Rollouts`` offers; both are
    thread-safe and called on the scrape's thread."""

    def known(self) -> list[str]: ...

    def status(self, name: str) -> dict: ...


def rollout_families(rollouts: RolloutSource) -> Iterator[Metric]:
    """Every rollout family; the collector drops the ones left empty."""
    state = GaugeMetricFamily(
        "edgebox_rollout_state",
        "Where the model's rollout stands: 0 none, 1 shadow, 2 canary, "
        "3 watching (promoted, the previous version still loaded)",
        labels=["model"],
    )
    samples = GaugeMetricFamily(
        "edgebox_rollout_samples",
        "Samples of the rollout in progress (compared answers for a shadow, answered "
        "requests for a canary); while watching, those it was promoted on",
        labels=["model", "version"],
    )
    agreement = GaugeMetricFamily(
        "edgebox_rollout_agreement",
        "Share of the shadow rollout's compared answers that agreed, 0.0-1.0",
        labels=["model", "version"],
    )
    candidate_p95 = GaugeMetricFamily(
        "edgebox_rollout_candidate_latency_p95_seconds",
        "95th percentile latency of the new version's answers in the rollout",
        labels=["model", "version"],
    )
    serving_p95 = GaugeMetricFamily(
        "edgebox_rollout_serving_latency_p95_seconds",
        "95th percentile latency of the serving version's answers during the rollout",
        labels=["model", "version"],
    )
    samples_total = CounterMetricFamily(
        "edgebox_rollout_samples",
        "Samples taken by the model's rollouts since start",
        labels=["model"],
    )
    dropped_total = CounterMetricFamily(
        "edgebox_rollout_shadow_dropped",
        "Shadow copies left out because the new version was busy, since start",
        labels=["model"],
    )
    outcomes_total = CounterMetricFamily(
        "edgebox_rollout_outcomes",
        "How the model's rollouts ended since start: promoted, rejected, "
        "rolled_back (after promotion) or quarantined (the daemon died while it ran)",
        labels=["model", "result"],
    )
    for name in rollouts.known():
        status = rollouts.status(name)
        state.add_metric([name], STAGES.get(status["stage"], -1))
        totals = status["totals"]
        samples_total.add_metric([name], totals["samples"])
        dropped_total.add_metric([name], totals["dropped"])
        for result in OUTCOMES:
            outcomes_total.add_metric([name, result], totals[result])
        if status["stage"] == "none":
            continue
        labels = [name, str(status["version"])]
        samples.add_metric(labels, status["samples"])
        # The status document's agreement of a canary reads 0.0 (nothing is
        # compared), where its events say None: only a shadow's is a figure.
        if status["policy"] == "shadow" and status["agreement"] is not None:
            agreement.add_metric(labels, status["agreement"])
        if status["candidate_p95_ms"] is not None:
            candidate_p95.add_metric(labels, status["candidate_p95_ms"] / 1000)
        if status["serving_p95_ms"] is not None:
            serving_p95.add_metric(labels, status["serving_p95_ms"] / 1000)
    yield from (state, samples, agreement, candidate_p95, serving_p95)
    yield from (samples_total, dropped_total, outcomes_total)
