"""ModelStatistics hands out typed, frozen snapshots: what Triton's statistics
extension and gRPC's ModelStatistics both report, without any wire shape."""

from __future__ import annotations

import dataclasses

import pytest

from edgebox.scheduling.statistics import (
    InferBatchStatistics,
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
