"""Bounded, timed loops and their summaries.

Every loop stops at a deadline or a call count, whichever comes first, so a
stalled peer cannot hang the run. A :class:`Round` is one such loop; figures
across rounds are medians of the per-round values, so a slow spell on the
machine shifts one round of every measurement rather than one measurement.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Round:
    """Latencies of the calls in one bounded loop, and the loop's wall time."""

    latencies_ns: np.ndarray
    elapsed_s: float

    @property
    def calls(self) -> int:
        return len(self.latencies_ns)

    @property
    def p50_us(self) -> float:
        return float(np.percentile(self.latencies_ns, 50)) / 1e3

    @property
    def p99_us(self) -> float:
        return float(np.percentile(self.latencies_ns, 99)) / 1e3

    @property
    def rate_per_s(self) -> float:
        return self.calls / self.elapsed_s


def timed_calls(call: Callable[[], object], duration_s: float, max_calls: int) -> Round:
    """Call ``call`` back to back on this thread until ``duration_s`` passed or
    ``max_calls`` were made (at least one), timing each call."""
    clock = time.perf_counter_ns
    latencies = np.empty(max_calls, dtype=np.int64)
    start = clock()
    deadline = start + int(duration_s * 1e9)
    count = 0
    now = start
    while count < max_calls and (count == 0 or now < deadline):
        before = clock()
        call()
        now = clock()
        latencies[count] = now - before
        count += 1
    return Round(latencies[:count].copy(), (now - start) / 1e9)


def merge(rounds: Sequence[Round], elapsed_s: float) -> Round:
    """Several loops that ran side by side (one per client thread) as one round."""
    return Round(np.concatenate([r.latencies_ns for r in rounds]), elapsed_s)


@dataclass(frozen=True)
class Summary:
    """Medians across rounds of the per-round p50, p99 and rate."""

    rounds: int
    calls: int
    p50_us: float
    p99_us: float
    rate_per_s: float
    p50_low_us: float
    p50_high_us: float

    @classmethod
    def of(cls, rounds: Sequence[Round]) -> Summary:
        p50s = [r.p50_us for r in rounds]
        return cls(
            rounds=len(rounds),
            calls=sum(r.calls for r in rounds),
            p50_us=statistics.median(p50s),
            p99_us=statistics.median(r.p99_us for r in rounds),
            rate_per_s=statistics.median(r.rate_per_s for r in rounds),
            p50_low_us=min(p50s),
            p50_high_us=max(p50s),
        )

    def as_dict(self) -> dict:
        return {
            "rounds": self.rounds,
            "calls": self.calls,
            "p50_us": round(self.p50_us, 1),
            "p99_us": round(self.p99_us, 1),
            "rate_per_s": round(self.rate_per_s, 1),
            "p50_range_us": [round(self.p50_low_us, 1), round(self.p50_high_us, 1)],
        }


def closed_loops(
    concurrency: int,
    duration_s: float,
    max_calls: int,
    open_client: Callable[[int], tuple[Callable[[], object], Callable[[], None]]],
    label: str,
) -> Round:
    """``concurrency`` closed-loop clients, one thread each, timed together:
    ``open_client(index)`` returns (call, close); each client makes one untimed
    call, all start at a barrier, and each stops after ``duration_s`` or
    ``max_calls``. A failing client aborts the round with its error."""
    ready = threading.Barrier(concurrency + 1, timeout=60)
    rounds: list = [None] * concurrency

    def worker(index: int) -> None:
        close = None
        try:
            call, close = open_client(index)
            call()
            ready.wait()
            rounds[index] = timed_calls(call, duration_s, max_calls)
        except BaseException as exc:
            rounds[index] = exc
            ready.abort()
        finally:
            if close is not None:
                close()

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"bench-{label}-{i}", daemon=True)
        for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    start = time.perf_counter()
    for thread in threads:
        thread.join(duration_s + 120)
    elapsed = time.perf_counter() - start
    for outcome in rounds:
        if isinstance(outcome, BaseException):
            raise RuntimeError(f"a {label} client thread failed: {outcome!r}") from outcome
        if outcome is None:
            raise RuntimeError(f"a {label} client thread did not finish")
    return merge(rounds, elapsed)
