"""Per-version counters in the shape of Triton's statistics extension.

Durations are kept in nanoseconds, as ``{"count", "ns"}`` pairs; ``success``
and ``fail`` cover a request's whole stay in the scheduler, ``queue`` the wait
for a free instance, ``compute_*`` the instance's work. Any thread may record;
one lock keeps a snapshot consistent.
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

    def as_dict(self) -> dict:
        return {"count": self.count, "ns": self.ns}


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

    def as_dict(self, name: str, version: str) -> dict:
        with self._lock:
            return {
                "name": name,
                "version": version,
                "last_inference": self.last_inference_ms,
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "inference_stats": {
                    "success": self.success.as_dict(),
                    "fail": self.fail.as_dict(),
                    "queue": self.queue.as_dict(),
                    "compute_input": self.compute_input.as_dict(),
                    "compute_infer": self.compute_infer.as_dict(),
                    "compute_output": self.compute_output.as_dict(),
                    "cache_hit": Duration().as_dict(),
                    "cache_miss": Duration().as_dict(),
                },
                "batch_stats": [
                    {
                        "batch_size": size,
                        "compute_input": stats.compute_input.as_dict(),
                        "compute_infer": stats.compute_infer.as_dict(),
                        "compute_output": stats.compute_output.as_dict(),
                    }
                    for size, stats in sorted(self._batches.items())
                ],
            }
