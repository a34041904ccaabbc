"""An engine run for a fixed time, counted in frames, with the board's power
read alongside: what ``fps`` and watts in the engines section mean.

The loop runs on the thread that owns the engine (its CUDA thread), so no
frame waits on a queue between threads and the count is the engine's, copies
in and out included, as the daemon runs it. Power is read between frames,
not from a thread of its own: a sysfs read takes well under a millisecond,
and once every ``power_period_s`` it costs the count nothing measurable. The
first reading is taken one period in, so the pause before the run (the
comparison, the build) is not averaged into it. Time comes from ``clock``
(``time.monotonic`` on a device), so tests drive a run of any length with a
fake clock instead of sleeping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

POWER_PERIOD_S = 0.5
"""Between power readings: 40 over a 20 s run."""

PowerReader = Callable[[], "float | None"]
"""The board's power in mW now (telemetry's ``total_power_mw``); None when
it cannot be read."""


@dataclass(frozen=True)
class RunFigures:
    frames: int
    elapsed_s: float
    power_mw: tuple[float, ...] = ()
    """The readings that gave a number; a run without any has no power figure."""

    @property
    def fps(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mean_power_mw(self) -> float | None:
        return math.fsum(self.power_mw) / len(self.power_mw) if self.power_mw else None

    @property
    def energy_per_frame_mj(self) -> float | None:
        """mW divided by frames a second is mJ a frame."""
        power = self.mean_power_mw
        return power / self.fps if power is not None and self.fps > 0 else None


def run_for(
    step: Callable[[], object],
    seconds: float,
    clock: Callable[[], float],
    read_power_mw: PowerReader | None = None,
    power_period_s: float = POWER_PERIOD_S,
) -> RunFigures:
    """Call ``step`` (one frame) until ``seconds`` have passed on ``clock``;
    the last frame may end past the mark, and ``elapsed_s`` includes it."""
    start = clock()
    next_reading = start + power_period_s
    frames = 0
    readings: list[float] = []
    now = start
    while now - start < seconds:
        if read_power_mw is not None and now >= next_reading:
            reading = read_power_mw()
            if reading is not None and math.isfinite(reading):
                readings.append(float(reading))
            next_reading = now + power_period_s
        step()
        frames += 1
        now = clock()
    return RunFigures(frames, now - start, tuple(readings))
