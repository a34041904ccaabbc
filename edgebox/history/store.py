"""Every series' rings, per tier, and the bucket each tier is filling.

Each sampled interval goes to every tier's open bucket; a tier's bucket
closes once it spans the tier's step, and then every series in it gets one
point, all stamped with the same time (so a chart can line versions up).
Counts are summed before figures are made, so a 24 h point's p99 is the
p99 of the requests of those 8 minutes, not a mean of p99s.

A series is one (model, version). At most ``max_series`` are kept: a new one
past that is not recorded (logged once per run). A series that stops
appearing (its version unloaded) gets no more points and is forgotten once
its newest point has left every tier's span.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from edgebox.history.counters import IntervalCounts
from edgebox.history.device import DeviceMeans
from edgebox.history.tiers import Point, Ring, Tier

log = logging.getLogger("edgebox.history")

SeriesKey = tuple[str, str]
"""(model name, version)."""
ModelFigures = tuple["float | None", ...]


@dataclass
class _Bucket:
    start: float
    models: dict[SeriesKey, IntervalCounts] = field(default_factory=dict)
    device: DeviceMeans = field(default_factory=DeviceMeans)


class HistoryStore:
    """Owned by the sampler's thread, which alone adds; any thread may read
    (the dashboard's requests): a lock is held around each, short."""

    def __init__(self, tiers: tuple[Tier, ...], max_series: int) -> None:
        self.tiers = {tier.name: tier for tier in tiers}
        self.max_series = max_series
        self._close_slack_s = tiers[0].step_s / 2
        self._models: dict[str, dict[SeriesKey, Ring[ModelFigures]]] = {t.name: {} for t in tiers}
        self._device: dict[str, Ring[dict[str, float]]] = {t.name: Ring(t.capacity) for t in tiers}
        self._open: dict[str, _Bucket | None] = {t.name: None for t in tiers}
        self._lock = threading.Lock()
        self._cap_logged = False
        self.refused_series = 0
        """Series not recorded because ``max_series`` were kept already."""

    def add_interval(
        self,
        start: float,
        end: float,
        intervals: Mapping[SeriesKey, IntervalCounts],
        device: DeviceMeans,
    ) -> None:
        """One sampled interval, ``start`` to ``end`` (wall-clock seconds)."""
        with self._lock:
            self._forget_stale(end, intervals)
            admitted = self._admit(intervals)
            for name, tier in self.tiers.items():
                bucket = self._open[name] or _Bucket(start)
                for key, counts in admitted.items():
                    held = bucket.models.get(key)
                    bucket.models[key] = counts if held is None else held.plus(counts)
                bucket.device.merge(device)
                if end - bucket.start >= tier.step_s - self._close_slack_s:
                    self._close(name, tier, bucket, end)
                    self._open[name] = None
                else:
                    self._open[name] = bucket

    def _close(self, name: str, tier: Tier, bucket: _Bucket, end: float) -> None:
        rings = self._models[name]
        for key, counts in bucket.models.items():
            ring = rings.get(key)
            if ring is None:
                ring = rings[key] = Ring(tier.capacity)
            ring.append(end, counts.figures())
        if bucket.device:
            self._device[name].append(end, bucket.device.means())

    def _tracked(self) -> set[SeriesKey]:
        keys: set[SeriesKey] = set()
        for rings in self._models.values():
            keys.update(rings)
        for bucket in self._open.values():
            if bucket is not None:
                keys.update(bucket.models)
        return keys

    def _admit(self, intervals: Mapping[SeriesKey, IntervalCounts]) -> dict:
        tracked = self._tracked()
        admitted = {}
        for key in sorted(intervals):
            if key not in tracked:
                if len(tracked) >= self.max_series:
                    self.refused_series += 1
                    if not self._cap_logged:
                        self._cap_logged = True
                        log.warning(
                            "history: keeping %d series (history.max_series) already; "
                            "model '%s' version %s and any further ones get no history",
                            self.max_series,
                            *key,
                        )
                    continue
                tracked.add(key)
            admitted[key] = intervals[key]
        return admitted

    def _forget_stale(self, now: float, present: Mapping[SeriesKey, IntervalCounts]) -> None:
        """Drops the points that left their tier's span, and the series with
        no point left that are not being sampled."""
        for name, rings in self._models.items():
            oldest = now - self.tiers[name].span_s
            for key in list(rings):
                ring = rings[key]
                if key not in present and (ring.newest is None or ring.newest <= oldest):
                    del rings[key]

    def restore(
        self,
        name: str,
        models: Mapping[SeriesKey, list[Point[ModelFigures]]],
        device: list[Point[dict[str, float]]],
    ) -> None:
        """Points read back from disk, into tier ``name`` (at start, before
        the sampler adds any); series past ``max_series`` are left out."""
        with self._lock:
            tier = self.tiers[name]
            tracked = self._tracked()
            for key in sorted(models):
                if key not in tracked and len(tracked) >= self.max_series:
                    continue
                tracked.add(key)
                ring = self._models[name].setdefault(key, Ring(tier.capacity))
                for point in models[key]:
                    ring.append(point.timestamp, point.value)
            ring_device = self._device[name]
            for point in device:
                ring_device.append(point.timestamp, point.value)

    def series(
        self, name: str, model: str | None = None, version: str | None = None
    ) -> list[tuple[SeriesKey, list[Point[ModelFigures]]]]:
        """Tier ``name``'s model series (only ``model``'s, only ``version``'s
        when given), by model then version number."""
        with self._lock:
            chosen = [
                (key, ring.points())
                for key, ring in self._models[name].items()
                if (model is None or key[0] == model) and (version is None or key[1] == version)
            ]
        return sorted(chosen, key=lambda item: (item[0][0], _version_order(item[0][1])))

    def device(self, name: str) -> list[Point[dict[str, float]]]:
        with self._lock:
            return self._device[name].points()

    def model_names(self) -> set[str]:
        with self._lock:
            return {key[0] for rings in self._models.values() for key in rings}

    def versions_of(self, model: str) -> set[str]:
        with self._lock:
            return {key[1] for rings in self._models.values() for key in rings if key[0] == model}


def _version_order(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (sys.maxsize, version)
