"""A stream's read-to-result distribution: nearest-rank percentiles (always
a measured value), a histogram that counts every result once, and only the
most recent results."""

from __future__ import annotations

from edgebox.streams.latency_window import BUCKET_BOUNDS_MS, LatencyWindow


def test_nothing_before_the_first_result():
    assert LatencyWindow().summary() is None


def test_percentiles_are_nearest_rank_values_that_were_measured():
    window = LatencyWindow()
    for ms in range(100, 0, -1):  # 1..100 ms, added out of order
        window.add(float(ms))
    summary = window.summary()
    assert (summary.count, summary.p50_ms, summary.p90_ms, summary.p99_ms, summary.max_ms) == (
        100,
        50.0,
        90.0,
        99.0,
        100.0,
    )


def test_each_result_falls_in_one_bucket_bounds_included():
    window = LatencyWindow()
    for ms in (10.0, 10.5, 20.0, 5000.0, 5000.1, 0.2):
        window.add(ms)
    buckets = dict(window.summary().buckets)
    assert list(buckets) == [*BUCKET_BOUNDS_MS, None]
    assert (buckets[10.0], buckets[20.0], buckets[5000.0], buckets[None]) == (2, 2, 1, 1)
    assert sum(buckets.values()) == 6


def test_only_the_most_recent_results_count():
    window = LatencyWindow(keep=3)
    for ms in (900.0, 900.0, 900.0, 1.0, 2.0, 3.0):
        window.add(ms)
    summary = window.summary()
    assert (summary.count, summary.max_ms) == (3, 3.0)
