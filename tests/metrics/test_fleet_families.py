"""The fleet agent's figures as Prometheus families, through the real
collector and exposition: what the agent wrote is what a scrape shows, and
every refusal kind and every state of a known model has its series from the
start (so ``increase()`` and ``== 1`` work across a fleet)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from edgebox.fleet.figures import REFUSAL_KINDS, FleetFigures
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.fleet_families import MODEL_STATES


def scrape(figures: FleetFigures) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(MetricsCollector(None, custom=None, fleet=figures))
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("edgebox_fleet")
    }


def test_a_fresh_agent_shows_generation_0_and_every_refusal_kind_at_0():
    samples = scrape(FleetFigures())
    assert samples[("edgebox_fleet_generation", ())] == 0
    assert samples[("edgebox_fleet_download_bytes_total", ())] == 0
    refused = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "edgebox_fleet_documents_refused_total"
    }
    assert refused == dict.fromkeys(REFUSAL_KINDS, 0)
    assert not [name for name, _ in samples if name == "edgebox_fleet_models"]


def test_what_the_agent_recorded_is_what_a_scrape_shows():
    figures = FleetFigures()
    figures.set_generation(17)
    figures.set_model_state("lane_detector", "downloading")
    figures.set_model_state("lane_detector", "rolling_out")
    figures.set_model_state("old_model", "serving")
    figures.set_model_state("old_model", None)
    figures.set_model_state("square_diff", "not_targeted")
    figures.add_download_bytes(1000)
    figures.add_download_bytes(234)
    figures.count_refusal("signature")
    figures.count_refusal("signature")
    figures.count_refusal("generation")
    samples = scrape(figures)
    assert samples[("edgebox_fleet_generation", ())] == 17
    assert samples[("edgebox_fleet_download_bytes_total", ())] == 1234
    refused = ("edgebox_fleet_documents_refused_total", (("reason_kind", "signature"),))
    assert samples[refused] == 2
    assert samples[("edgebox_fleet_documents_refused_total", (("reason_kind", "key"),))] == 0
    models = {
        (dict(labels)["model"], dict(labels)["state"]): value
        for (name, labels), value in samples.items()
        if name == "edgebox_fleet_models"
    }
    assert {key: value for key, value in models.items() if value == 1} == {
        ("lane_detector", "rolling_out"): 1,
        ("square_diff", "not_targeted"): 1,
    }
    assert set(models) == {(m, s) for m in ("lane_detector", "square_diff") for s in MODEL_STATES}


def test_an_unknown_refusal_kind_or_a_negative_byte_count_is_refused():
    figures = FleetFigures()
    with pytest.raises(ValueError, match="refusal kind 'sig': expected one of signature"):
        figures.count_refusal("sig")
    with pytest.raises(ValueError, match="cannot go down"):
        figures.add_download_bytes(-1)


def test_counts_from_several_threads_all_land():
    figures = FleetFigures()

    def work() -> None:
        for _ in range(1000):
            figures.add_download_bytes(1)
            figures.count_refusal("malformed")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    snapshot = figures.snapshot()
    assert (snapshot.download_bytes, snapshot.refused["malformed"]) == (4000, 4000)
