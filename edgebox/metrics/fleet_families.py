"""Prometheus families of the fleet agent (docs/fleet.md): the generation
applied, each model's fleet state, artifact bytes downloaded and documents
refused by kind, from a ``FleetFigures`` snapshot taken at scrape time. A
fleet's Prometheus (federation or remote-write) sums them across devices:
``count by (state) (edgebox_fleet_models == 1)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from edgebox.fleet import document
from edgebox.fleet.figures import FleetSnapshot

MODEL_STATES = document.MODEL_STATES
"""Every state gets a series per model (1 for the current one, 0 for the
others), so a state a model leaves drops to 0 instead of going stale."""


class FleetSource(Protocol):
    """What ``edgebox.fleet.figures.FleetFigures`` offers (thread-safe)."""

    def snapshot(self) -> FleetSnapshot: ...


def fleet_families(figures: FleetSource) -> Iterator[Metric]:
    snapshot = figures.snapshot()
    generation = GaugeMetricFamily(
        "edgebox_fleet_generation",
        "The generation of the fleet's desired state last applied (0: none yet)",
    )
    generation.add_metric([], snapshot.generation)
    models = GaugeMetricFamily(
        "edgebox_fleet_models",
        "1 for the model's current fleet state, 0 for the others",
        labels=["model", "state"],
    )
    for model in sorted(snapshot.models):
        current = snapshot.models[model]
        states = MODEL_STATES if current in MODEL_STATES else (*MODEL_STATES, current)
        for state in states:
            models.add_metric([model, state], 1 if state == current else 0)
    downloaded = CounterMetricFamily(
        "edgebox_fleet_download_bytes",
        "Artifact bytes downloaded since start, resumed downloads included",
    )
    downloaded.add_metric([], snapshot.download_bytes)
    refused = CounterMetricFamily(
        "edgebox_fleet_documents_refused",
        "Desired-state documents refused since start, by reason: signature, key "
        "(not trusted), group, generation (not newer), malformed, artifact (too big "
        "or mismatched)",
        labels=["reason_kind"],
    )
    for kind, count in snapshot.refused.items():
        refused.add_metric([kind], count)
    yield from (generation, models, downloaded, refused)
