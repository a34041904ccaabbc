"""The custom metric families model code creates (python_backend's
``pb_utils.MetricFamily`` / ``Metric``), kept so the collector exports them
with the daemon's own at scrape time.

One registry per process (``registry``): python models run in the daemon's
interpreter and Triton's custom metrics are server-wide too. A family lives
while the model holds its ``MetricFamily`` object or a ``Metric`` of it, a
series while the model holds its ``Metric``: when the model is unloaded and
its objects are collected, they leave the export, as under Triton. Two
families of one name share their series if they are of the same kind; of
another kind, the second is refused.

Cost on the request path: ``increment`` / ``set`` / ``observe`` take the
family's lock and change one number (a histogram: one bucket found by
bisection). Scrapes copy each family's numbers under the same lock.
Spec: https://github.com/triton-inference-server/python_backend#custom-metrics
"""

from __future__ import annotations

import bisect
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
        key = label_key(labels)
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


def label_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``labels`` as the key of their series, whatever order the model gave
    them in; CustomMetricError for what Prometheus could not show."""
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
"""This process's one registry: pb_utils adds to it; the collector reads it in
the daemon, a ``ChangeFeed`` in an isolated model's process."""
