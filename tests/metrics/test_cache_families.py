"""Triton's response-cache metrics: per version, for every version whose
config enables ``response_cache`` (zeros without a cache, as Triton exports
them), counters under Triton's names and help texts; for the whole cache,
gauges only while a cache is configured."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from edgebox.caching.response_cache import ResponseCache
from edgebox.dataplane import DataPlane
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.exposition import render
from edgebox.tensors import InferRequest, Tensor
from model_fixtures import add_add_sub

PER_MODEL = {
    "nv_cache_num_hits_per_model": "Number of cache hits per model",
    "nv_cache_hit_duration_per_model": "Total cache hit duration per model, in microseconds",
    "nv_cache_num_misses_per_model": "Number of cache misses per model",
    "nv_cache_miss_duration_per_model": (
        "Total cache miss (insert+lookup) duration per model, in microseconds"
    ),
}
CACHE_WIDE = {
    "nv_cache_util": "Cache utilization [0.0 - 1.0]",
    "nv_cache_num_entries": "Number of responses stored in response cache",
    "nv_cache_num_hits": "Number of cache hits in response cache",
    "nv_cache_num_misses": "Number of cache misses in response cache",
    "nv_cache_num_lookups": "Number of cache lookups in response cache",
    "nv_cache_num_evictions": "Number of cache evictions in response cache",
    "nv_cache_lookup_duration": "Total cache lookup duration (hit and miss), in microseconds",
    "nv_cache_insertion_duration": "Total cache insertion duration, in microseconds",
}
LABELS = {"model": "cached", "version": "1"}


def scrape(collector: MetricsCollector) -> tuple[str, dict]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = render(registry).decode()
    return text, {family.name: family for family in text_string_to_metric_families(text)}


def request(value: float) -> InferRequest:
    data = np.full((1, 16), value, dtype=np.float32)
    return InferRequest("cached", [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)])


@pytest.fixture
def models(stack, tmp_path):
    add_add_sub(tmp_path, "cached", config_extra="\nresponse_cache { enable: true }\n")
    add_add_sub(tmp_path, "plain")
    for name in ("cached", "plain"):
        stack.manager.load_model(name)
    return stack


def test_hits_and_misses_are_triton_counters_per_version_enabling_the_cache(models):
    cache = ResponseCache(1 << 20)
    models.dataplane = DataPlane(models.registry, response_cache=cache)
    for value in (1.0, 1.0, 1.0, 2.0):
        models.dataplane.infer(request(value))

    text, families = scrape(MetricsCollector(models.dataplane, response_cache=cache))

    for name, help_text in PER_MODEL.items():
        assert families[name].documentation == help_text
        assert f"# TYPE {name} counter" in text
        assert [sample.labels for sample in families[name].samples] == [LABELS]
    value = {name: families[name].samples[0].value for name in PER_MODEL}
    assert value["nv_cache_num_hits_per_model"] == 2
    assert value["nv_cache_num_misses_per_model"] == 2
    stats = models.dataplane.statistics("cached")[0].counts.inference_stats
    assert value["nv_cache_hit_duration_per_model"] == stats.cache_hit.ns // 1000
    assert value["nv_cache_miss_duration_per_model"] == stats.cache_miss.ns // 1000
    assert families["nv_inference_request_success"].samples[0].value == 4
    assert families["nv_inference_count"].samples[0].value == 2


def test_the_whole_cache_is_a_set_of_gauges(models):
    answer_bytes = 2 * (64 + len("OUTPUT0"))
    cache = ResponseCache(2 * answer_bytes)
    models.dataplane = DataPlane(models.registry, response_cache=cache)
    for value in (1.0, 1.0, 2.0, 3.0):
        models.dataplane.infer(request(value))

    text, families = scrape(MetricsCollector(models.dataplane, response_cache=cache))

    for name, help_text in CACHE_WIDE.items():
        assert families[name].documentation == help_text
        assert f"# TYPE {name} gauge" in text
    value = {name: families[name].samples[0].value for name in CACHE_WIDE}
    assert value["nv_cache_num_entries"] == 2
    assert (value["nv_cache_num_hits"], value["nv_cache_num_misses"]) == (1, 3)
    assert value["nv_cache_num_lookups"] == 4
    assert value["nv_cache_num_evictions"] == 1
    assert value["nv_cache_util"] == 1.0
    figures = cache.statistics()
    assert value["nv_cache_lookup_duration"] == figures.lookup_ns // 1000
    assert value["nv_cache_insertion_duration"] == figures.insertion_ns // 1000


def test_without_a_cache_enabled_models_show_zeros_and_no_cache_wide_gauges(models):
    for value in (1.0, 1.0):
        models.dataplane.infer(request(value))

    _, families = scrape(MetricsCollector(models.dataplane))

    for name in PER_MODEL:
        assert [(s.labels, s.value) for s in families[name].samples] == [(LABELS, 0.0)]
    assert not any(name in families for name in CACHE_WIDE)
