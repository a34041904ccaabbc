"""Waves: how far each step of a deploy reaches, ``1,10%,100%``.

A wave is a device count or a share of the group's known devices, and the
waves are cumulative: each reaches the first n devices in the order of their
targeting bucket, so a device in an early wave stays in every later one and
the order is the one ``targeting.bucket`` gives every tool. The last wave, at
100%, targets ``all`` rather than a list, so that devices offline during the
deploy, or added after it, converge too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgebox.fleet.document import MAX_DEVICES, Targets
from edgebox.fleet.targeting import bucket

MAX_WAVES = 20


@dataclass(frozen=True)
class Wave:
    count: int | None = None
    percent: float | None = None

    def __str__(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent:g}%"

    @property
    def everyone(self) -> bool:
        return self.percent is not None and self.percent >= 100

    def size(self, known: int) -> int:
        if self.count is not None:
            return min(self.count, known)
        return min(known, math.ceil(self.percent * known / 100))


def parse_waves(text: str) -> list[Wave]:
    """``1,10%,100%``; ValueError saying which item is wrong."""
    waves: list[Wave] = []
    items = text.split(",")
    if len(items) > MAX_WAVES:
        raise ValueError(f"at most {MAX_WAVES} waves, got {len(items)}")
    for item in items:
        item = item.strip()
        try:
            if item.endswith("%"):
                percent = float(item[:-1])
                if not (0 < percent <= 100) or math.isnan(percent):
                    raise ValueError
                waves.append(Wave(percent=percent))
            else:
                count = int(item)
                if not 1 <= count <= MAX_DEVICES:
                    raise ValueError
                waves.append(Wave(count=count))
        except ValueError:
            raise ValueError(
                f"wave '{item}': expected a device count (1..{MAX_DEVICES}) or a "
                "percentage (above 0, at most 100%)"
            ) from None
    return waves


def wave_order(group: str, model: str, devices: list[str]) -> list[str]:
    """Devices in the order waves reach them (ties by id, for a stable order)."""
    return sorted(devices, key=lambda device: (bucket(group, model, device), device))


def wave_targets(wave: Wave, ordered: list[str]) -> tuple[Targets, tuple[str, ...]]:
    """The document's targets for ``wave`` and the known devices it reaches."""
    if wave.everyone:
        return Targets(all=True), tuple(ordered)
    reached = tuple(ordered[: wave.size(len(ordered))])
    return Targets(devices=reached), reached
