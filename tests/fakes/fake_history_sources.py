"""What the history sampler reads, held by the test: real ``ModelStatistics``
counters per (model, version), which the test records into, and a clock the
test moves."""

from __future__ import annotations

from edgebox.dataplane_results import VersionStatistics
from edgebox.scheduling.statistics import ModelStatistics


class FakeStatisticsSource:
    """``DataPlane.statistics()`` as the sampler calls it: one entry per
    served version, from the real counters in ``served``."""

    def __init__(self) -> None:
        self.served: dict[tuple[str, str], ModelStatistics] = {}

    def serve(self, model: str, version: str = "1") -> ModelStatistics:
        counters = self.served[(model, version)] = ModelStatistics()
        return counters

    def __call__(self) -> list[VersionStatistics]:
        return [
            VersionStatistics(model, version, counters.snapshot())
            for (model, version), counters in sorted(self.served.items())
        ]


class FakeClock:
    """Wall-clock seconds that move only when the test says."""

    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
