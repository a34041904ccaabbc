"""custom_metrics/ holds the Prometheus families python models count
themselves (``pb_utils.MetricFamily`` / ``Metric``): the registry they write
into (``families``) and, for a model in a process of its own, the feed that
carries its families to the daemon's registry (``mirror``).

Invariant: it lives beside its writer and imports nothing above the
foundation; ``metrics/``, at the top of the daemon, reads it at scrape time.
What an isolated process sends is untrusted: a family the mirror cannot take
is left out and logged, never raised into the request that carried it.
"""

from edgebox.backends.python.custom_metrics.families import (
    COUNTER,
    GAUGE,
    HISTOGRAM,
    KINDS,
    CustomMetricError,
    CustomMetricRegistry,
    Family,
    FamilySnapshot,
    Series,
    SeriesSnapshot,
    increment,
    label_key,
    observe,
    registry,
    set_value,
    value_of,
)
from edgebox.backends.python.custom_metrics.mirror import (
    MIRROR_MAX_BUCKETS,
    MIRROR_MAX_FAMILIES,
    MIRROR_MAX_SERIES,
    MIRROR_MAX_TEXT,
    ChangeFeed,
    MetricMirror,
)

__all__ = [
    "COUNTER",
    "GAUGE",
    "HISTOGRAM",
    "KINDS",
    "MIRROR_MAX_BUCKETS",
    "MIRROR_MAX_FAMILIES",
    "MIRROR_MAX_SERIES",
    "MIRROR_MAX_TEXT",
    "ChangeFeed",
    "CustomMetricError",
    "CustomMetricRegistry",
    "Family",
    "FamilySnapshot",
    "MetricMirror",
    "Series",
    "SeriesSnapshot",
    "increment",
    "label_key",
    "observe",
    "registry",
    "set_value",
    "value_of",
]
