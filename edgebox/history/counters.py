"""Cumulative statistics counters read at one moment, and what happened
between two readings: the dataplane's counters only ever grow (until a
version is loaded again and starts from zero), so every figure of an
interval comes from a difference of two readings.

Percentiles come from the difference of the latency histograms (the
requests that finished in the interval), never from the all-time histogram:
a p99 that moved an hour ago stays visible where it moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.dataplane_results import LatencyHistogram, StatisticsSnapshot

MODEL_COLUMNS: tuple[str, ...] = (
    "requests_per_s",
    "failures_per_s",
    "p50_us",
    "p99_us",
    "mean_queue_us",
    "mean_compute_us",
    "mean_batch_size",
)
"""A version's figures per point, in this order: requests (successes and
failures) and failures per second; p50 and p99 of the successful requests'
durations (within one histogram bucket, 25%); mean queue wait and mean
compute (``compute_infer``) per request in µs; mean executed batch size.
A figure with nothing to average over (no request) is None."""

_EMPTY_LATENCY = LatencyHistogram().counts


@dataclass(frozen=True)
class CounterReading:
    """One version's cumulative counters, as ``StatisticsSnapshot`` holds them."""

    success: int = 0
    fail: int = 0
    queue_count: int = 0
    queue_ns: int = 0
    compute_count: int = 0
    compute_ns: int = 0
    executions: int = 0
    """Executions counted per batch size (``batch_stats``)."""
    batched: int = 0
    """The sum over executions of their batch size."""
    latency: tuple[int, ...] = _EMPTY_LATENCY

    @classmethod
    def of(cls, snapshot: StatisticsSnapshot) -> CounterReading:
        stats = snapshot.inference_stats
        executions = batched = 0
        for batch in snapshot.batch_stats:
            executions += batch.compute_infer.count
            batched += batch.batch_size * batch.compute_infer.count
        return cls(
            success=stats.success.count,
            fail=stats.fail.count,
            queue_count=stats.queue.count,
            queue_ns=stats.queue.ns,
            compute_count=stats.compute_infer.count,
            compute_ns=stats.compute_infer.ns,
            executions=executions,
            batched=batched,
            latency=snapshot.request_latency.counts,
        )

    def went_back_from(self, earlier: CounterReading) -> bool:
        """A counter is lower than in ``earlier``: the version was loaded
        again (new counters from zero) between the two readings."""
        return (
            self.success < earlier.success
            or self.fail < earlier.fail
            or self.queue_count < earlier.queue_count
            or self.executions < earlier.executions
            or any(now < then for now, then in zip(self.latency, earlier.latency, strict=True))
        )


@dataclass(frozen=True)
class IntervalCounts:
    """What one version did during ``duration_s`` seconds: the counters'
    differences. Sums of consecutive intervals (``plus``) are exact, so a
    coarse tier's point has the same meaning as a fine one's."""

    duration_s: float
    requests: int = 0
    fail: int = 0
    queue_count: int = 0
    queue_ns: int = 0
    compute_count: int = 0
    compute_ns: int = 0
    executions: int = 0
    batched: int = 0
    latency: tuple[int, ...] = _EMPTY_LATENCY

    @classmethod
    def between(
        cls, earlier: CounterReading, later: CounterReading, duration_s: float
    ) -> IntervalCounts:
        """``later`` minus ``earlier``; when the counters went back (a
        reload), everything ``later`` counts happened in the interval, as
        Prometheus' ``rate`` reads a counter reset."""
        base = CounterReading() if later.went_back_from(earlier) else earlier
        return cls(
            duration_s=duration_s,
            requests=(later.success - base.success) + (later.fail - base.fail),
            fail=later.fail - base.fail,
            queue_count=later.queue_count - base.queue_count,
            queue_ns=later.queue_ns - base.queue_ns,
            compute_count=later.compute_count - base.compute_count,
            compute_ns=later.compute_ns - base.compute_ns,
            executions=later.executions - base.executions,
            batched=later.batched - base.batched,
            latency=tuple(a - b for a, b in zip(later.latency, base.latency, strict=True)),
        )

    def plus(self, other: IntervalCounts) -> IntervalCounts:
        return IntervalCounts(
            duration_s=self.duration_s + other.duration_s,
            requests=self.requests + other.requests,
            fail=self.fail + other.fail,
            queue_count=self.queue_count + other.queue_count,
            queue_ns=self.queue_ns + other.queue_ns,
            compute_count=self.compute_count + other.compute_count,
            compute_ns=self.compute_ns + other.compute_ns,
            executions=self.executions + other.executions,
            batched=self.batched + other.batched,
            latency=tuple(a + b for a, b in zip(self.latency, other.latency, strict=True)),
        )

    def figures(self) -> tuple[float | None, ...]:
        """The values of ``MODEL_COLUMNS`` for this interval."""
        latency = LatencyHistogram(self.latency)
        per_s = 1.0 / self.duration_s if self.duration_s > 0 else 0.0
        return (
            round(self.requests * per_s, 3),
            round(self.fail * per_s, 3),
            _rounded(latency.quantile_us(0.5)),
            _rounded(latency.quantile_us(0.99)),
            _mean_us(self.queue_ns, self.queue_count),
            _mean_us(self.compute_ns, self.compute_count),
            round(self.batched / self.executions, 2) if self.executions else None,
        )


def _mean_us(ns: int, count: int) -> float | None:
    return round(ns / count / 1e3, 1) if count else None


def _rounded(us: float | None) -> float | None:
    return round(us, 1) if us is not None else None
