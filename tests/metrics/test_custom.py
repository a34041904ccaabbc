"""Custom metric families (``edgebox/backends/python/custom_metrics/``) as the collector
exports them: under their own names, a counter declared ``counter`` with no
``_total``, a gauge, a histogram with its buckets cumulative, as Triton 2.51 shows them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from edgebox.backends.python import custom_metrics as custom
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.exposition import render


def scrape_text(registry: custom.CustomMetricRegistry) -> str:
    prometheus = CollectorRegistry()
    prometheus.register(MetricsCollector(None, custom=registry))
    return render(prometheus).decode()


def test_custom_families_are_exported_as_triton_exports_them() -> None:
    registry = custom.CustomMetricRegistry()
    counter = registry.family("probe_count", "a counter", custom.COUNTER)
    _, count = registry.series(counter, {"model": "probe"}, None)
    custom.increment(counter, count, 2)
    gauge = registry.family("probe_gauge", "a gauge", custom.GAUGE)
    _, level = registry.series(gauge, {"k": "v"}, None)
    custom.set_value(gauge, level, 7)
    histogram = registry.family("probe_hist", "a histogram", custom.HISTOGRAM)
    _, observed = registry.series(histogram, {"model": "probe"}, [0.5, 2.0])
    custom.observe(histogram, observed, 1.0)
    text = scrape_text(registry)
    for line in (
        "# HELP probe_count a counter",
        "# TYPE probe_count counter",
        'probe_count{model="probe"} 2.0',
        "# TYPE probe_gauge gauge",
        'probe_gauge{k="v"} 7.0',
        "# TYPE probe_hist histogram",
        'probe_hist_bucket{le="0.5",model="probe"} 0.0',
        'probe_hist_bucket{le="2.0",model="probe"} 1.0',
        'probe_hist_bucket{le="+Inf",model="probe"} 1.0',
        'probe_hist_count{model="probe"} 1.0',
        'probe_hist_sum{model="probe"} 1.0',
    ):
        assert line in text.splitlines(), f"{line!r} not in:\n{text}"
    assert "probe_count_total" not in text


def test_released_series_and_families_leave_the_export() -> None:
    registry = custom.CustomMetricRegistry()
    family = registry.family("gone_soon", "d", custom.GAUGE)
    key, series = registry.series(family, {}, None)
    custom.set_value(family, series, 1)
    assert "gone_soon 1.0" in scrape_text(registry)
    registry.release_series(family, key)
    registry.release_family(family)
    assert "gone_soon" not in scrape_text(registry)
    assert registry.snapshot() == []
