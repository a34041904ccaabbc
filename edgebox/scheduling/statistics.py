"""Per-version counters with the phases of Triton's statistics extension.

Durations are kept in nanoseconds, as count and total pairs; ``success`` and
``fail`` cover a request's whole stay in the scheduler, ``queue`` the wait for
a free instance, ``compute_*`` the instance's work. Any thread may record; one
lock keeps a snapshot consistent. ``snapshot`` hands out frozen copies named
after gRPC's ``ModelStatistics`` parts; each transport renders them (HTTP's
JSON, gRPC's messages), so no wire shape lives here.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_statistics.md
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns

    def frozen(self) -> StatisticDuration:
        return StatisticDuration(self.count, self.ns)


@dataclass(frozen=True)
class StatisticDuration:
    """How many times a phase ran and its total nanoseconds."""

    count: int = 0
    ns: int = 0


@dataclass(frozen=True)
class InferStatistics:
    """Request-level phases. Counted per request, so a batch of three
    requests adds three to each ``compute_*`` count. edgebox has no response
    cache: ``cache_hit`` and ``cache_miss`` stay zero."""

    success: StatisticDuration
    fail: StatisticDuration
    queue: StatisticDuration
    compute_input: StatisticDuration
    compute_infer: StatisticDuration
    compute_output: StatisticDuration
    cache_hit: StatisticDuration
    cache_miss: StatisticDuration


@dataclass(frozen=True)
class InferBatchStatistics:
    """The compute phases of every execution of ``batch_size`` inferences,
    counted per execution."""

    batch_size: int
    compute_input: StatisticDuration
    compute_infer: StatisticDuration
    compute_output: StatisticDuration


@dataclass(frozen=True)
class StatisticsSnapshot:
    """One version's counters at one moment; ``batch_stats`` ascend by size."""

    last_inference_ms: int
    inference_count: int
    execution_count: int
    inference_stats: InferStatistics
    batch_stats: tuple[InferBatchStatistics, ...]


@dataclass
class _BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


class ModelStatistics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last_inference_ms = 0
        self.inference_count = 0
        self.execution_count = 0
        self.success = Duration()
        self.fail = Duration()
        self.queue = Duration()
        self.compute_input = Duration()
        self.compute_infer = Duration()
        self.compute_output = Duration()
        self._batches: dict[int, _BatchStats] = {}

    def record_execution(
        self, batch_size: int, requests: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """One ``execute`` of ``requests`` requests holding ``batch_size`` inferences."""
        with self._lock:
            self.execution_count += 1
            self.inference_count += batch_size
            self.compute_input.add(input_ns, requests)
            self.compute_infer.add(infer_ns, requests)
            self.compute_output.add(output_ns, requests)
            batch = self._batches.get(batch_size)
            if batch is None:
                batch = self._batches[batch_size] = _BatchStats()
            batch.compute_input.add(input_ns)
            batch.compute_infer.add(infer_ns)
            batch.compute_output.add(output_ns)

    def record_request(self, ok: bool, total_ns: int, queue_ns: int = 0) -> None:
        with self._lock:
            (self.success if ok else self.fail).add(total_ns)
            if ok:
                self.queue.add(queue_ns)
            self.last_inference_ms = time.time_ns() // 1_000_000

    def snapshot(self) -> StatisticsSnapshot:
        """A consistent, frozen copy: later records do not change it."""
        with self._lock:
            return StatisticsSnapshot(
                last_inference_ms=self.last_inference_ms,
                inference_count=self.inference_count,
                execution_count=self.execution_count,
                inference_stats=InferStatistics(
                    success=self.success.frozen(),
                    fail=self.fail.frozen(),
                    queue=self.queue.frozen(),
                    compute_input=self.compute_input.frozen(),
                    compute_infer=self.compute_infer.frozen(),
                    compute_output=self.compute_output.frozen(),
                    cache_hit=StatisticDuration(),
                    cache_miss=StatisticDuration(),
                ),
                batch_stats=tuple(
                    InferBatchStatistics(
                        batch_size=size,
                        compute_input=stats.compute_input.frozen(),
                        compute_infer=stats.compute_infer.frozen(),
                        compute_output=stats.compute_output.frozen(),
                    )
                    for size, stats in sorted(self._batches.items())
                ),
            )
