"""Custom metrics that model code creates (python_backend's
``pb_utils.MetricFamily`` / ``Metric``), kept here so the collector exports
them with the daemon's own at scrape time.

One registry per process (``registry``): python models run in the daemon's
interpreter and Triton's custom metrics are server-wide too. A family lives
while the model holds its ``MetricFamily`` object or a ``Metric`` of it, a
series while the model holds its ``Metric``: when the model is unloaded and
its objects are collected, they leave the export, as under Triton. Two
families of one name share their series if they are of the same kind; of
another kind, the second is refused.

An isolated model (``EDGEBOX_ISOLATION: process``) keeps its families in
the registry of its own process; a ``ChangeFeed`` there puts the families
that changed into the next message to the daemon, where the process's
``MetricMirror`` adds them to this registry: as in-process families, under
the same names, labels and kinds, and shared the same way (two instances'
counters and histograms add up, a gauge shows the value set last). The
mirror holds what it added while the process lives; when the process ends
(unload, or a crash before its restart), its holds are released.

Cost on the request path: ``increment`` / ``set`` / ``observe`` take the
family's lock and change one number (a histogram: one bucket found by
bisection). Scrapes copy each family's numbers under the same lock.
Spec: https://github.com/triton-inference-server/python_backend#custom-metrics
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"
KINDS = (COUNTER, GAUGE, HISTOGRAM)

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_log = logging.getLogger("edgebox.metrics.custom")

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


class CustomMetricError(ValueError):
    """What the model asked cannot be done; pb_utils raises it to the model
    as a TritonModelException with Triton's text."""


class Series:
    """One labelled series: a number, or a histogram's bucket counts, sum
    and count. Changed under its family's lock."""

    __slots__ = ("buckets", "counts", "sum", "value")

    def __init__(self, buckets: tuple[float, ...] | None) -> None:
        self.value = 0.0
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1) if buckets is not None else None
        self.sum = 0.0


@dataclass(frozen=True)
class SeriesSnapshot:
    labels: dict[str, str]
    value: float
    buckets: tuple[float, ...] | None
    counts: tuple[int, ...] | None
    sum: float


@dataclass(frozen=True)
class FamilySnapshot:
    name: str
    description: str
    kind: str
    series: tuple[SeriesSnapshot, ...]


class Family:
    """A family's series by label set; how many model objects hold each."""

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name = name
        self.description = description
        self.kind = kind
        self.lock = threading.Lock()
        self.series: dict[tuple[tuple[str, str], ...], Series] = {}
        self.holders: dict[tuple[tuple[str, str], ...], int] = {}
        self.family_holders = 0
        self.revision = 0
        """Bumped under ``lock`` by every change to a value or the series
        set, so a ``ChangeFeed`` sends only families that changed."""

    def snapshot(self) -> FamilySnapshot:
        with self.lock:
            series = tuple(
                SeriesSnapshot(
                    dict(key),
                    entry.value,
                    entry.buckets,
                    tuple(entry.counts) if entry.counts is not None else None,
                    entry.sum,
                )
                for key, entry in self.series.items()
            )
        return FamilySnapshot(self.name, self.description, self.kind, series)


class CustomMetricRegistry:
    """Thread-safe; model code adds and drops families and series from any
    thread, the collector snapshots from the metrics server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, Family] = {}

    def family(self, name: str, description: str, kind: str) -> Family:
        """The family named ``name``, created if new; one more holder."""
        if kind not in KINDS:
            raise CustomMetricError(f"metric family '{name}': unknown kind {kind!r}")
        if not isinstance(name, str) or not _NAME.match(name):
            raise CustomMetricError(
                f"Error when creating MetricFamily: '{name}' is not a valid metric name "
                "(letters, digits, '_' and ':', not starting with a digit)"
            )
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = Family(name, description, kind)
            elif family.kind != kind:
                raise CustomMetricError(
                    "Error when creating MetricFamily: Family name already exists with "
                    "different type"
                )
            family.family_holders += 1
            return family

    def release_family(self, family: Family) -> None:
        with self._lock:
            family.family_holders -= 1
            self._drop_if_unheld(family)

    def series(
        self, family: Family, labels: Mapping[str, str], buckets: Sequence[float] | None
    ) -> tuple[tuple[tuple[str, str], ...], Series]:
        """The series for ``labels``, created if new; one more holder."""
        if (family.kind == HISTOGRAM) != (buckets is not None):
            raise CustomMetricError(
                "Failed to create metric. "
                + ("Missing required buckets." if buckets is None else "Unexpected buckets found.")
            )
        key = _label_key(labels)
        bounds = None
        if buckets is not None:
            bounds = tuple(float(bound) for bound in buckets)
            if list(bounds) != sorted(set(bounds)) or any(math.isnan(b) for b in bounds):
                raise CustomMetricError(
                    f"Failed to create metric. buckets must be increasing, got {list(buckets)}"
                )
        with self._lock, family.lock:
            series = family.series.get(key)
            if series is None:
                series = family.series[key] = Series(bounds)
                family.holders[key] = 0
                family.revision += 1
            family.holders[key] += 1
        return key, series

    def release_series(self, family: Family, key: tuple[tuple[str, str], ...]) -> None:
        with self._lock:
            with family.lock:
                family.holders[key] -= 1
                if family.holders[key] == 0:
                    del family.holders[key]
                    del family.series[key]
                    family.revision += 1
            self._drop_if_unheld(family)

    def snapshot(self) -> list[FamilySnapshot]:
        return [family.snapshot() for family in self.families()]

    def families(self) -> list[Family]:
        with self._lock:
            return list(self._families.values())

    def _drop_if_unheld(self, family: Family) -> None:
        unheld = family.family_holders == 0 and not family.holders
        if unheld and self._families.get(family.name) is family:
            del self._families[family.name]


def _label_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(labels, Mapping):
        raise CustomMetricError(
            f"Failed to create metric. labels must be a dict, got {type(labels).__name__}"
        )
    for key, value in labels.items():
        if not isinstance(key, str) or not _LABEL.match(key) or not isinstance(value, str):
            raise CustomMetricError(
                f"Failed to create metric. label {key!r}: {value!r} is not a valid "
                "name (letters, digits, '_') and string value"
            )
    return tuple(sorted(labels.items()))


def increment(family: Family, series: Series, value: float) -> None:
    if family.kind == HISTOGRAM:
        raise CustomMetricError(_unsupported(family, "Increment"))
    if family.kind == COUNTER and value < 0:
        raise CustomMetricError(
            "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
            "non-negative values."
        )
    with family.lock:
        series.value += value
        family.revision += 1


def set_value(family: Family, series: Series, value: float) -> None:
    if family.kind != GAUGE:
        raise CustomMetricError(_unsupported(family, "Set"))
    with family.lock:
        series.value = value
        family.revision += 1


def observe(family: Family, series: Series, value: float) -> None:
    if family.kind != HISTOGRAM:
        raise CustomMetricError(_unsupported(family, "Observe"))
    with family.lock:
        series.counts[bisect.bisect_left(series.buckets, value)] += 1
        series.sum += value
        family.revision += 1


def value_of(family: Family, series: Series) -> float:
    if family.kind == HISTOGRAM:
        raise CustomMetricError(_unsupported(family, "Value"))
    with family.lock:
        return series.value


def _unsupported(family: Family, what: str) -> str:
    return f"TRITONSERVER_METRIC_KIND_{family.kind.upper()} does not support {what}"


registry = CustomMetricRegistry()
"""The daemon's one registry: pb_utils adds to it, the collector reads it."""


# ---------------------------------------------------------------- isolated models


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
            key = _label_key(series["labels"])
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
