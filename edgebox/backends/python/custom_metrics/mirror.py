"""An isolated model's custom metrics (``EDGEBOX_ISOLATION: process``),
carried to the daemon's registry.

The model keeps its families in the registry of its own process; a
``ChangeFeed`` there puts the families that changed into the next message to
the daemon, where the process's ``MetricMirror`` adds them to the daemon's
registry: as in-process families, under the same names, labels and kinds,
and shared the same way (two instances' counters and histograms add up, a
gauge shows the value set last). The mirror holds what it added while the
process lives; when the process ends (unload, or a crash before its
restart), its holds are released.
"""

from __future__ import annotations

import logging
import math
import threading

from edgebox.backends.python.custom_metrics.families import (
    COUNTER,
    HISTOGRAM,
    CustomMetricError,
    CustomMetricRegistry,
    Family,
    Series,
    label_key,
)

_log = logging.getLogger("edgebox.backends.python.custom_metrics")

MIRROR_MAX_FAMILIES = 100
"""Families one isolated model process may add to the daemon's registry;
past it, new families are left out (and logged once)."""
MIRROR_MAX_SERIES = 1000
"""Series, over all its families, one isolated model process may add."""
MIRROR_MAX_BUCKETS = 100
"""Bucket bounds a mirrored histogram series may have."""
MIRROR_MAX_TEXT = 4096
"""Characters in a mirrored family's name and description, and in a
series' label names and values together."""
_MAX_WARNINGS = 8
_MAX_WARNING_CHARS = 1000


class ChangeFeed:
    """In an isolated model's process: the families of ``source`` that
    changed since the last ``changes()``, as JSON for the daemon's
    ``MetricMirror``. Called by the one thread that answers the daemon; a
    change made by another thread of the model (a background thread) leaves
    with the next message, so it shows after the next response.

    Each changed family goes whole (its series with their values), so the
    daemon never depends on having seen an earlier message. What is sent is
    cut to the mirror's caps, which bounds a message's size."""

    def __init__(self, source: CustomMetricRegistry) -> None:
        self._source = source
        self._sent: dict[str, tuple[Family, int]] = {}

    def changes(self) -> dict | None:
        """``{"families": [...], "dropped": [names]}``, or None when nothing changed."""
        families = self._source.families()[:MIRROR_MAX_FAMILIES]
        changed = []
        budget = MIRROR_MAX_SERIES
        current: dict[str, tuple[Family, int]] = {}
        for family in families:
            with family.lock:
                revision = family.revision
                count = len(family.series)
                sent = self._sent.get(family.name)
                if sent is None or sent[0] is not family or sent[1] != revision:
                    changed.append(_family_message(family, budget))
            budget = max(0, budget - count)
            current[family.name] = (family, revision)
        dropped = [name for name in self._sent if name not in current]
        self._sent = current
        if not changed and not dropped:
            return None
        return {"families": changed, "dropped": dropped}


def _family_message(family: Family, budget: int) -> dict:
    """``family`` as JSON, its first ``budget`` series; the caller holds its lock."""
    series = []
    for key, entry in list(family.series.items())[:budget]:
        if entry.counts is None:
            series.append({"labels": dict(key), "value": entry.value})
        else:
            series.append(
                {
                    "labels": dict(key),
                    "buckets": list(entry.buckets),
                    "counts": list(entry.counts),
                    "sum": entry.sum,
                }
            )
    return {
        "name": family.name,
        "description": family.description,
        "kind": family.kind,
        "series": series,
    }


class _Mirrored:
    """One series as the mirror last saw it in the process, and the series it
    adds to in the daemon's registry."""

    __slots__ = ("counts", "key", "series", "sum", "value")

    def __init__(self, key: tuple[tuple[str, str], ...], series: Series) -> None:
        self.key = key
        self.series = series
        self.value: float | None = None
        self.counts = [0] * len(series.counts) if series.counts is not None else None
        self.sum = 0.0


class MetricMirror:
    """The daemon's side of one isolated model process's families: applies
    each ``ChangeFeed`` message to ``target`` as the model's own
    ``MetricFamily`` / ``Metric`` objects would in the daemon. A counter or
    histogram adds what grew since the last message to the shared series, a
    gauge is set when its value in the process changed; so two processes of
    one model add up, as two in-process instances sharing a series do.

    The process's messages are untrusted: what is malformed, refused by the
    registry (a name of another kind) or past the caps (``MIRROR_MAX_*``) is
    left out and logged, never raised, so a model's answers do not depend on
    its metrics. Thread-safe: the thread talking to the process applies,
    whichever thread ends the process closes."""

    def __init__(self, where: str, target: CustomMetricRegistry) -> None:
        self._where = where
        self._target = target
        self._lock = threading.Lock()
        self._families: dict[str, tuple[Family, dict[tuple[tuple[str, str], ...], _Mirrored]]] = {}
        self._series_count = 0
        self._closed = False
        self._warned: set[str] = set()

    def apply(self, changes: object) -> None:
        if changes is None:
            return
        with self._lock:
            if self._closed:
                return
            if not isinstance(changes, dict):
                self._warn(f"metrics update is a {type(changes).__name__}, expected an object")
                return
            dropped = changes.get("dropped", [])
            families = changes.get("families", [])
            if not isinstance(dropped, list) or not isinstance(families, list):
                self._warn("metrics update: 'dropped' and 'families' must be lists")
                return
            for name in dropped:
                if isinstance(name, str):
                    self._drop(name)
            for entry in families:
                try:
                    self._apply_family(entry)
                except (CustomMetricError, KeyError, OverflowError, TypeError, ValueError) as err:
                    self._warn(f"custom metric left out: {err}")

    def close(self) -> None:
        """Release everything this process added; later messages are ignored."""
        with self._lock:
            self._closed = True
            for name in list(self._families):
                self._drop(name)

    def _apply_family(self, entry: object) -> None:
        if not isinstance(entry, dict):
            raise TypeError(f"a family is a {type(entry).__name__}, expected an object")
        name, description, kind = entry["name"], entry["description"], entry["kind"]
        if not isinstance(description, str) or not isinstance(entry["series"], list):
            raise TypeError(f"family '{name}': malformed")
        if len(str(name)) + len(description) > MIRROR_MAX_TEXT:
            raise ValueError(
                f"a family's name and description may have at most {MIRROR_MAX_TEXT} characters"
            )
        mirrored = self._families.get(name)
        if mirrored is not None and mirrored[0].kind != kind:
            self._drop(name)
            mirrored = None
        if mirrored is None:
            if len(self._families) >= MIRROR_MAX_FAMILIES:
                self._warn(
                    f"family '{name}' left out: a model process may export at most "
                    f"{MIRROR_MAX_FAMILIES} families"
                )
                return
            mirrored = self._families[name] = (self._target.family(name, description, kind), {})
        family, held = mirrored
        incoming: dict[tuple[tuple[str, str], ...], dict] = {}
        for series in entry["series"]:
            if not isinstance(series, dict):
                raise TypeError(f"family '{name}': a series is not an object")
            key = label_key(series["labels"])
            if sum(len(label) + len(value) for label, value in key) > MIRROR_MAX_TEXT:
                raise ValueError(
                    f"family '{name}': a series' labels may have at most {MIRROR_MAX_TEXT} "
                    "characters"
                )
            incoming[key] = series
        for key in [key for key in held if key not in incoming]:
            self._target.release_series(family, held.pop(key).key)
            self._series_count -= 1
        for key, series in incoming.items():
            mirror = held.get(key)
            if mirror is None:
                if self._series_count >= MIRROR_MAX_SERIES:
                    self._warn(
                        f"family '{name}': series left out: a model process may export at "
                        f"most {MIRROR_MAX_SERIES} series"
                    )
                    continue
                buckets = series.get("buckets")
                if buckets is not None and (
                    not isinstance(buckets, list) or len(buckets) > MIRROR_MAX_BUCKETS
                ):
                    raise ValueError(
                        f"family '{name}': at most {MIRROR_MAX_BUCKETS} buckets a series"
                    )
                key, target = self._target.series(family, dict(key), buckets)
                mirror = held[key] = _Mirrored(key, target)
                self._series_count += 1
            _update(family, mirror, series)

    def _drop(self, name: str) -> None:
        mirrored = self._families.pop(name, None)
        if mirrored is None:
            return
        family, held = mirrored
        for mirror in held.values():
            self._target.release_series(family, mirror.key)
        self._series_count -= len(held)
        self._target.release_family(family)

    def _warn(self, what: str) -> None:
        what = what[:_MAX_WARNING_CHARS]
        if len(self._warned) < _MAX_WARNINGS and what not in self._warned:
            self._warned.add(what)
            _log.warning("%s: %s", self._where, what)


def _update(family: Family, mirror: _Mirrored, series: dict) -> None:
    """Apply one series' values from the process to its daemon series."""
    if family.kind == HISTOGRAM:
        counts, total = series["counts"], series["sum"]
        if (
            not isinstance(counts, list)
            or mirror.counts is None
            or len(counts) != len(mirror.counts)
            or tuple(float(b) for b in series["buckets"]) != mirror.series.buckets
        ):
            raise ValueError(
                f"family '{family.name}': histogram buckets differ from the series' "
                f"{list(mirror.series.buckets or ())}"
            )
        counts = [int(count) for count in counts]
        total = float(total)
        with family.lock:
            for index, (now, before) in enumerate(zip(counts, mirror.counts, strict=True)):
                if now > before:
                    mirror.series.counts[index] += now - before
            if math.isfinite(total - mirror.sum):
                mirror.series.sum += total - mirror.sum
            family.revision += 1
        mirror.counts, mirror.sum = counts, total
        return
    value = series["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"family '{family.name}': a value is a {type(value).__name__}")
    value = float(value)
    with family.lock:
        if family.kind == COUNTER:
            grown = value - (mirror.value or 0.0)
            if grown > 0 and math.isfinite(grown):
                mirror.series.value += grown
        elif mirror.value is None or value != mirror.value:
            mirror.series.value = value
        family.revision += 1
    mirror.value = value
