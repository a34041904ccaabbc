"""Per-interval figures from two readings of cumulative counters: rates,
means, and percentiles of the interval's own requests."""

from __future__ import annotations

import itertools

import pytest

from edgebox.history.counters import MODEL_COLUMNS, CounterReading, IntervalCounts
from edgebox.scheduling.statistics import ModelStatistics

MS = 1_000_000


def figures(counts: IntervalCounts) -> dict:
    return dict(zip(MODEL_COLUMNS, counts.figures(), strict=True))


def test_rates_are_the_counters_differences_over_the_interval():
    counters = ModelStatistics()
    for _ in range(3):
        counters.record_request(True, 1 * MS)
    before = CounterReading.of(counters.snapshot())
    for _ in range(10):
        counters.record_request(True, 1 * MS, queue_ns=200_000)
    for _ in range(2):
        counters.record_request(False, 1 * MS)
    after = CounterReading.of(counters.snapshot())
    shown = figures(IntervalCounts.between(before, after, 5.0))
    assert shown["requests_per_s"] == pytest.approx(12 / 5)
    assert shown["failures_per_s"] == pytest.approx(2 / 5)
    assert shown["mean_queue_us"] == pytest.approx(200.0)
    assert 1000 / 1.25 <= shown["p50_us"] <= 1000 * 1.25


def test_percentiles_are_those_of_the_interval_not_of_all_time():
    counters = ModelStatistics()
    for _ in range(1000):
        counters.record_request(True, 100_000)  # 100 µs
    before = CounterReading.of(counters.snapshot())
    for _ in range(10):
        counters.record_request(True, 50 * MS)
    after = CounterReading.of(counters.snapshot())
    shown = figures(IntervalCounts.between(before, after, 5.0))
    assert 50_000 / 1.25 <= shown["p50_us"] <= 50_000 * 1.25
    assert 50_000 / 1.25 <= shown["p99_us"] <= 50_000 * 1.25
    all_time = counters.snapshot().request_latency.quantile_us(0.5)
    assert all_time < 1000


def test_an_idle_interval_has_zero_rates_and_no_means():
    counters = ModelStatistics()
    counters.record_request(True, MS)
    reading = CounterReading.of(counters.snapshot())
    shown = figures(IntervalCounts.between(reading, reading, 5.0))
    assert shown == {
        "requests_per_s": 0.0,
        "failures_per_s": 0.0,
        "p50_us": None,
        "p99_us": None,
        "mean_queue_us": None,
        "mean_compute_us": None,
        "mean_batch_size": None,
    }


def test_mean_batch_size_and_compute_come_from_the_executions_of_the_interval():
    counters = ModelStatistics()
    counters.record_execution(8, 8, 0, 8 * MS, 0)
    before = CounterReading.of(counters.snapshot())
    counters.record_execution(4, 4, 0, 4 * MS, 0)
    counters.record_execution(4, 4, 0, 4 * MS, 0)
    counters.record_execution(1, 1, 0, 1 * MS, 0)
    after = CounterReading.of(counters.snapshot())
    shown = figures(IntervalCounts.between(before, after, 5.0))
    assert shown["mean_batch_size"] == pytest.approx(round((4 + 4 + 1) / 3, 2))
    # An execution's compute time counts once, its requests each: 9 ms over 9.
    assert shown["mean_compute_us"] == pytest.approx(9 * 1000 / 9)


def test_counters_that_went_back_count_from_zero():
    old = ModelStatistics()
    for _ in range(50):
        old.record_request(True, MS)
    before = CounterReading.of(old.snapshot())
    reloaded = ModelStatistics()
    for _ in range(5):
        reloaded.record_request(True, MS)
    after = CounterReading.of(reloaded.snapshot())
    assert after.went_back_from(before)
    assert figures(IntervalCounts.between(before, after, 5.0))["requests_per_s"] == 1.0


def test_summed_intervals_give_the_figures_of_the_whole():
    counters = ModelStatistics()
    readings = [CounterReading.of(counters.snapshot())]
    for step, latency_ms in enumerate((1, 3, 9, 27)):
        for _ in range(step * 5 + 1):
            counters.record_request(True, latency_ms * MS, queue_ns=step * 1000)
        readings.append(CounterReading.of(counters.snapshot()))
    parts = [IntervalCounts.between(a, b, 5.0) for a, b in itertools.pairwise(readings)]
    summed = parts[0]
    for part in parts[1:]:
        summed = summed.plus(part)
    whole = IntervalCounts.between(readings[0], readings[-1], 20.0)
    assert summed == whole
    assert summed.figures() == whole.figures()
