"""Triton's response-cache families: per model version, the hits and misses
its statistics count (``nv_cache_*_per_model``, counters in µs as Triton
declares them), and for the whole cache the figures of the one local cache
(``nv_cache_num_entries`` ... ``nv_cache_util``, gauges as in Triton).

As Triton 2.51 exports them: the per-model series for every version whose
config enables ``response_cache``, cache or not (all zero without one); the
cache-wide gauges only while a cache is configured. Triton refreshes those on
its metrics interval (2 s), edgebox reads them at the scrape.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md#response-cache-metrics
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from edgebox.caching.response_cache import CacheStatistics
from edgebox.dataplane_results import StatisticsSnapshot, VersionStatistics
from edgebox.metrics.exposition import TritonCounter

_PER_MODEL: tuple[tuple[str, str, Callable[[StatisticsSnapshot], int]], ...] = (
    (
        "nv_cache_num_hits_per_model",
        "Number of cache hits per model",
        lambda c: c.inference_stats.cache_hit.count,
    ),
    (
        "nv_cache_hit_duration_per_model",
        "Total cache hit duration per model, in microseconds",
        lambda c: c.inference_stats.cache_hit.ns // 1000,
    ),
    (
        "nv_cache_num_misses_per_model",
        "Number of cache misses per model",
        lambda c: c.inference_stats.cache_miss.count,
    ),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
        lambda c: c.inference_stats.cache_miss.ns // 1000,
    ),
)

_CACHE_WIDE: tuple[tuple[str, str, Callable[[CacheStatistics], float]], ...] = (
    ("nv_cache_util", "Cache utilization [0.0 - 1.0]", lambda s: s.utilization),
    (
        "nv_cache_num_entries",
        "Number of responses stored in response cache",
        lambda s: s.entries,
    ),
    ("nv_cache_num_hits", "Number of cache hits in response cache", lambda s: s.hits),
    ("nv_cache_num_misses", "Number of cache misses in response cache", lambda s: s.misses),
    ("nv_cache_num_lookups", "Number of cache lookups in response cache", lambda s: s.lookups),
    (
        "nv_cache_num_evictions",
        "Number of cache evictions in response cache",
        lambda s: s.evictions,
    ),
    (
        "nv_cache_lookup_duration",
        "Total cache lookup duration (hit and miss), in microseconds",
        lambda s: s.lookup_ns // 1000,
    ),
    (
        "nv_cache_insertion_duration",
        "Total cache insertion duration, in microseconds",
        lambda s: s.insertion_ns // 1000,
    ),
)


def per_model_cache_families(statistics: Iterable[VersionStatistics]) -> Iterator[Metric]:
    """The ``*_per_model`` counters of the versions that enable the cache;
    the collector drops them when no version does."""
    cached = [entry for entry in statistics if entry.response_cache]
    for name, help_text, value in _PER_MODEL:
        family = TritonCounter(name, help_text)
        for entry in cached:
            family.add_sample(
                name, {"model": entry.name, "version": entry.version}, value(entry.counts)
            )
        yield family


def cache_families(statistics: CacheStatistics) -> Iterator[Metric]:
    for name, help_text, value in _CACHE_WIDE:
        yield GaugeMetricFamily(name, help_text, value(statistics))
