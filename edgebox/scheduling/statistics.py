"""Per-version counters with the phases of Triton's statistics extension.

Durations are kept in nanoseconds, as count and total pairs; ``success`` and
``fail`` cover a request's whole stay in the scheduler, ``queue`` the wait for
a free instance, ``compute_*`` the instance's work. Any thread may record; one
lock keeps a snapshot consistent. ``snapshot`` hands out frozen copies named
after gRPC's ``ModelStatistics`` parts; each transport renders them (HTTP's
JSON, gRPC's messages), so no wire shape lives here.

Beyond Triton, each version keeps a fixed-bucket histogram of its successful
requests' durations (the ``success`` phase), so the dashboard and Prometheus
can give percentiles; Triton's own statistics answers do not carry it.
Recording costs one ``bisect`` over the bounds, outside the lock, and one
list-item increment under the lock ``success`` already takes.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_statistics.md
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

_LATENCY_BOUNDS_NS: tuple[int, ...] = tuple(round(10_000 * 1.25**k) for k in range(74))
LATENCY_BUCKET_BOUNDS_US: tuple[float, ...] = tuple(ns / 1000 for ns in _LATENCY_BOUNDS_NS)
"""Upper bounds (inclusive, as Prometheus' ``le``) of the request latency
buckets, in µs: 10 µs, then 1.25 times the previous one up to about 119 s.
A last bucket past them counts the slower requests (overflow)."""


@dataclass(frozen=True)
class LatencyHistogram:
    """How many successful requests took at most each of
    ``LATENCY_BUCKET_BOUNDS_US`` (per bucket, not cumulative); ``counts`` has
    one more entry than the bounds, the overflow."""

    counts: tuple[int, ...] = (0,) * (len(LATENCY_BUCKET_BOUNDS_US) + 1)

    @property
    def count(self) -> int:
        return sum(self.counts)

    @classmethod
    def combined(cls, histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        """The bucket-wise sum, e.g. over a model's versions."""
        totals = list(cls().counts)
        for histogram in histograms:
            for index, count in enumerate(histogram.counts):
                totals[index] += count
        return cls(tuple(totals))

    def quantile_us(self, q: float) -> float | None:
        """The ``q`` quantile (0 to 1) in µs, None before the first request.
        The request of rank ceil(q * count) falls in some bucket; the answer is
        interpolated linearly within that bucket, so it is off by at most one
        bucket width: under 25% of the true value (10 µs in the first bucket,
        which starts at 0). In the overflow bucket it is the last bound, a
        floor. A ``q`` outside [0, 1] is a ValueError."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile_us: expected q in [0, 1], got {q}")
        total = self.count
        if total == 0:
            return None
        rank = q * total
        below = 0
        bounds = LATENCY_BUCKET_BOUNDS_US
        for index, count in enumerate(self.counts):
            if count and below + count >= rank:
                if index == len(bounds):
                    return bounds[-1]
                lower = bounds[index - 1] if index else 0.0
                return lower + (bounds[index] - lower) * max(rank - below, 0.0) / count
            below += count
        return bounds[-1]  # unreachable: the counts add up to total


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
    requests adds three to each ``compute_*`` count. ``cache_hit`` and
    ``cache_miss`` count response-cache lookups (``record_cache_hit``,
    ``record_cache_miss``); they stay zero without a cache."""

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
    request_latency: LatencyHistogram = LatencyHistogram()
    """Beyond Triton: the durations ``inference_stats.success`` sums, bucketed
    (so its count equals ``success.count``)."""


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
        self.cache_hit = Duration()
        self.cache_miss = Duration()
        self._batches: dict[int, _BatchStats] = {}
        self._latency_counts = [0] * (len(_LATENCY_BOUNDS_NS) + 1)

    def record_execution(
        self,
        batch_size: int,
        requests: int,
        input_ns: int,
        infer_ns: int,
        output_ns: int,
        *,
        inferences: int | None = None,
    ) -> None:
        """One ``execute`` of a batch of ``batch_size`` inferences, of which
        ``requests`` requests holding ``inferences`` inferences (all of them by
        default) were answered. As in Triton, ``batch_stats`` counts the whole
        batch while ``inference_count`` and the compute phases count only the
        answered requests: an execute that failed adds an execution and a batch
        but no inferences (``requests=0, inferences=0``)."""
        with self._lock:
            self.execution_count += 1
            self.inference_count += batch_size if inferences is None else inferences
            if requests:
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
        bucket = bisect_left(_LATENCY_BOUNDS_NS, total_ns)
        with self._lock:
            (self.success if ok else self.fail).add(total_ns)
            if ok:
                self.queue.add(queue_ns)
                self._latency_counts[bucket] += 1
            self.last_inference_ms = time.time_ns() // 1_000_000

    def record_cache_hit(self, ns: int) -> None:
        """A request answered from the response cache in ``ns``: as in Triton
        2.51, a success (its whole stay) with a queue count of no wait and a
        cache hit, but no inference, execution or compute phase."""
        bucket = bisect_left(_LATENCY_BOUNDS_NS, ns)
        with self._lock:
            self.success.add(ns)
            self.queue.add(0)
            self.cache_hit.add(ns)
            self._latency_counts[bucket] += 1
            self.last_inference_ms = time.time_ns() // 1_000_000

    def record_cache_miss(self, ns: int) -> None:
        """A lookup that found nothing, ``ns`` its lookup plus the insertion
        of the answer (if one was kept); the run itself is recorded as any
        request's."""
        with self._lock:
            self.cache_miss.add(ns)

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
                    cache_hit=self.cache_hit.frozen(),
                    cache_miss=self.cache_miss.frozen(),
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
                request_latency=LatencyHistogram(tuple(self._latency_counts)),
            )
