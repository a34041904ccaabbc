"""An isolated model process's custom metrics crossing to the daemon:
``ChangeFeed`` (in the process) sends the families that changed,
``MetricMirror`` (in the daemon) applies them to the exported registry, and
takes what a process sends as untrusted."""

from __future__ import annotations

import json
import logging

from edgebox.backends.python import custom_metrics as custom


def through_json(changes: dict | None) -> dict | None:
    """As the channel carries it."""
    return None if changes is None else json.loads(json.dumps(changes))


def test_the_feed_sends_only_what_changed_and_what_was_dropped() -> None:
    child = custom.CustomMetricRegistry()
    feed = custom.ChangeFeed(child)
    counter = child.family("fed_count", "d", custom.COUNTER)
    key, series = child.series(counter, {"k": "v"}, None)
    gauge = child.family("fed_gauge", "g", custom.GAUGE)
    first = feed.changes()
    assert first == {
        "families": [
            {
                "name": "fed_count",
                "description": "d",
                "kind": "counter",
                "series": [{"labels": {"k": "v"}, "value": 0.0}],
            },
            {"name": "fed_gauge", "description": "g", "kind": "gauge", "series": []},
        ],
        "dropped": [],
    }
    assert feed.changes() is None
    custom.increment(counter, series, 2)
    assert [family["name"] for family in feed.changes()["families"]] == ["fed_count"]
    child.release_family(gauge)
    assert feed.changes() == {"families": [], "dropped": ["fed_gauge"]}
    child.release_series(counter, key)
    child.release_family(counter)


def test_a_mirror_adds_what_grew_and_releases_all_on_close() -> None:
    child, daemon = custom.CustomMetricRegistry(), custom.CustomMetricRegistry()
    feed, mirror = custom.ChangeFeed(child), custom.MetricMirror("probe", daemon)
    counter = child.family("grown", "d", custom.COUNTER)
    key, series = child.series(counter, {}, None)
    custom.increment(counter, series, 2)
    mirror.apply(through_json(feed.changes()))
    custom.increment(counter, series, 3)
    mirror.apply(through_json(feed.changes()))
    assert [s.value for s in daemon.snapshot()[0].series] == [5]
    child.release_series(counter, key)
    mirror.apply(through_json(feed.changes()))
    assert daemon.snapshot()[0].series == ()
    mirror.close()
    assert daemon.snapshot() == []
    mirror.apply({"families": [{"name": "late", "description": "", "kind": "gauge", "series": []}]})
    assert daemon.snapshot() == []
    child.release_family(counter)


def test_a_mirror_leaves_out_what_is_malformed_or_refused_and_says_so(caplog) -> None:
    daemon = custom.CustomMetricRegistry()
    taken = daemon.family("taken", "another model's", custom.GAUGE)
    mirror = custom.MetricMirror("model 'm' version 1 instance 'm_0'", daemon)
    good = {"name": "fine", "description": "", "kind": "gauge", "series": []}
    with caplog.at_level(logging.WARNING, "edgebox.backends.python.custom_metrics"):
        mirror.apply([1, 2])
        mirror.apply(
            {
                "families": [
                    "nonsense",
                    {"name": "taken", "description": "", "kind": "counter", "series": []},
                    {"name": "bad name!", "description": "", "kind": "gauge", "series": []},
                    {
                        "name": "labelled",
                        "description": "",
                        "kind": "gauge",
                        "series": [{"labels": {"ok": 1}, "value": 1}],
                    },
                    {
                        "name": "wide",
                        "description": "",
                        "kind": "histogram",
                        "series": [
                            {
                                "labels": {},
                                "buckets": list(range(custom.MIRROR_MAX_BUCKETS + 1)),
                                "counts": [0] * (custom.MIRROR_MAX_BUCKETS + 2),
                                "sum": 0,
                            }
                        ],
                    },
                    {
                        "name": "verbose",
                        "description": "",
                        "kind": "gauge",
                        "series": [{"labels": {"k": "v" * custom.MIRROR_MAX_TEXT}, "value": 1}],
                    },
                    good,
                ]
            }
        )
    names = {family.name for family in daemon.snapshot()}
    assert names == {"taken", "fine", "labelled", "wide", "verbose"}
    messages = [record.getMessage() for record in caplog.records]
    assert messages[:3] == [
        "model 'm' version 1 instance 'm_0': metrics update is a list, expected an object",
        "model 'm' version 1 instance 'm_0': custom metric left out: a family is a str, "
        "expected an object",
        "model 'm' version 1 instance 'm_0': custom metric left out: Error when creating "
        "MetricFamily: Family name already exists with different type",
    ]
    assert messages[5] == (
        "model 'm' version 1 instance 'm_0': custom metric left out: family 'wide': at most "
        f"{custom.MIRROR_MAX_BUCKETS} buckets a series"
    )
    assert messages[6] == (
        "model 'm' version 1 instance 'm_0': custom metric left out: family 'verbose': a "
        f"series' labels may have at most {custom.MIRROR_MAX_TEXT} characters"
    )
    assert {f.name: f.series for f in daemon.snapshot()}["verbose"] == ()
    mirror.close()
    daemon.release_family(taken)
    assert daemon.snapshot() == []
