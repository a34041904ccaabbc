"""ModelStatistics hands out typed, frozen snapshots: what Triton's statistics
extension and gRPC's ModelStatistics both report, without any wire shape."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from edgebox.scheduling.statistics import (
    LATENCY_BUCKET_BOUNDS_US,
    InferBatchStatistics,
    LatencyHistogram,
    ModelStatistics,
    StatisticDuration,
    StatisticsSnapshot,
)


def test_snapshot_counts_every_phase_and_batch_size_in_order():
    statistics = ModelStatistics()
    statistics.record_execution(4, 2, input_ns=10, infer_ns=100, output_ns=20)
    statistics.record_execution(1, 1, input_ns=1, infer_ns=7, output_ns=2)
    statistics.record_request(True, 500, queue_ns=30)
    statistics.record_request(True, 300, queue_ns=5)
    statistics.record_request(False, 40)

    snapshot = statistics.snapshot()

    assert isinstance(snapshot, StatisticsSnapshot)
    assert (snapshot.inference_count, snapshot.execution_count) == (5, 2)
    assert snapshot.last_inference_ms > 0
    phases = snapshot.inference_stats
    assert phases.success == StatisticDuration(2, 800)
    assert phases.fail == StatisticDuration(1, 40)
    assert phases.queue == StatisticDuration(2, 35)
    assert phases.compute_input == StatisticDuration(3, 11)
    assert phases.compute_infer == StatisticDuration(3, 107)
    assert phases.compute_output == StatisticDuration(3, 22)
    assert phases.cache_hit == phases.cache_miss == StatisticDuration(0, 0)
    assert snapshot.batch_stats == (
        InferBatchStatistics(
            1, StatisticDuration(1, 1), StatisticDuration(1, 7), StatisticDuration(1, 2)
        ),
        InferBatchStatistics(
            4, StatisticDuration(1, 10), StatisticDuration(1, 100), StatisticDuration(1, 20)
        ),
    )


def test_snapshot_does_not_move_with_the_counters_and_cannot_be_changed():
    statistics = ModelStatistics()
    statistics.record_execution(1, 1, 1, 1, 1)
    snapshot = statistics.snapshot()
    statistics.record_execution(1, 1, 1, 1, 1)

    assert snapshot.execution_count == 1
    assert snapshot.batch_stats[0].compute_infer == StatisticDuration(1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.inference_stats.success.count = 9  # type: ignore[misc]


def test_a_version_never_run_has_an_empty_snapshot():
    snapshot = ModelStatistics().snapshot()
    assert (snapshot.last_inference_ms, snapshot.inference_count, snapshot.batch_stats) == (
        0,
        0,
        (),
    )
    assert snapshot.inference_stats.success == StatisticDuration(0, 0)


def _nearest_rank(sorted_us: list[float], q: float) -> float:
    return sorted_us[max(math.ceil(q * len(sorted_us)) - 1, 0)]


def _within_one_bucket(estimate_us: float, true_us: float) -> bool:
    """The bound quantile_us documents: the estimate lies in the bucket of
    the true value, so off by at most 25% of it (10 µs below the first bound)."""
    return abs(estimate_us - true_us) <= max(0.25 * true_us, LATENCY_BUCKET_BOUNDS_US[0])


@pytest.mark.parametrize(
    "durations_us",
    [
        [float(us) for us in range(1, 20_001)],
        [1_000.0] * 95 + [50_000.0] * 5,
        [float(math.exp(0.01 * i)) * 30 for i in range(1, 1_501)],
    ],
    ids=["uniform", "two_modes", "log_spread"],
)
def test_latency_quantiles_are_within_one_bucket_of_the_true_ones(durations_us):
    statistics = ModelStatistics()
    for us in durations_us:
        statistics.record_request(True, round(us * 1000))

    latency = statistics.snapshot().request_latency

    assert latency.count == len(durations_us)
    ordered = sorted(durations_us)
    for q in (0.0, 0.01, 0.5, 0.9, 0.99, 1.0):
        estimate = latency.quantile_us(q)
        assert _within_one_bucket(estimate, _nearest_rank(ordered, q)), (q, estimate)


def test_latency_buckets_are_log_spaced_upper_bounds_up_to_100_s_plus_overflow():
    bounds = LATENCY_BUCKET_BOUNDS_US
    assert bounds[0] == 10.0
    assert bounds[-1] >= 100_000_000.0
    assert all(
        later / earlier == pytest.approx(1.25, rel=1e-3)
        for earlier, later in itertools.pairwise(bounds)
    )
    assert 60 <= len(bounds) <= 80
    statistics = ModelStatistics()
    statistics.record_request(True, 10_000)  # exactly 10 µs: the first bucket (le)
    statistics.record_request(True, 10_001)
    statistics.record_request(True, 200 * 10**9)  # 200 s: overflow
    counts = statistics.snapshot().request_latency.counts
    assert len(counts) == len(bounds) + 1
    assert (counts[0], counts[1], counts[-1], sum(counts)) == (1, 1, 1, 3)


def test_only_successful_requests_enter_the_latency_histogram():
    statistics = ModelStatistics()
    statistics.record_request(False, 5_000_000)
    statistics.record_request(True, 2_000_000)
    snapshot = statistics.snapshot()
    assert snapshot.request_latency.count == snapshot.inference_stats.success.count == 1
    assert 1_600 <= snapshot.request_latency.quantile_us(0.5) <= 2_000 * 1.25


def test_latency_quantile_is_none_without_requests_and_rejects_q_outside_0_1():
    empty = ModelStatistics().snapshot().request_latency
    assert empty.count == 0
    assert empty.quantile_us(0.5) is None
    with pytest.raises(ValueError, match=r"^quantile_us: expected q in \[0, 1\], got 1\.5$"):
        empty.quantile_us(1.5)


def test_overflow_quantile_reads_the_last_bound_and_histograms_combine():
    slow, fast = ModelStatistics(), ModelStatistics()
    slow.record_request(True, 500 * 10**9)
    fast.record_request(True, 1_000_000)
    slow_latency = slow.snapshot().request_latency
    assert slow_latency.quantile_us(0.5) == LATENCY_BUCKET_BOUNDS_US[-1]

    both = LatencyHistogram.combined([slow_latency, fast.snapshot().request_latency])
    assert both.count == 2
    assert _within_one_bucket(both.quantile_us(0.5), 1_000.0)
    assert LatencyHistogram.combined([]).quantile_us(0.5) is None


def test_a_cache_hit_is_a_success_with_no_wait_and_nothing_computed():
    statistics = ModelStatistics()
    statistics.record_execution(1, 1, input_ns=1, infer_ns=7, output_ns=2)
    statistics.record_request(True, 900, queue_ns=50)
    statistics.record_cache_miss(30)
    statistics.record_cache_hit(40)

    snapshot = statistics.snapshot()

    phases = snapshot.inference_stats
    assert (snapshot.inference_count, snapshot.execution_count) == (1, 1)
    assert phases.success == StatisticDuration(2, 940)
    assert phases.queue == StatisticDuration(2, 50)
    assert phases.cache_hit == StatisticDuration(1, 40)
    assert phases.cache_miss == StatisticDuration(1, 30)
    assert phases.compute_infer == StatisticDuration(1, 7)
    assert snapshot.request_latency.count == 2
    assert snapshot.batch_stats[0].compute_infer == StatisticDuration(1, 7)
