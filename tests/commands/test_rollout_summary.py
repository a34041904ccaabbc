"""What ``edgebox rollout status`` prints for each stage of the rollout
resource, pinned line for line (times in UTC)."""

from __future__ import annotations

import time

import pytest

from edgebox.commands.rollout_summary import summaries, summary

STARTED = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
TOTALS = {"samples": 0, "dropped": 0, "promoted": 0, "rejected": 0, "rolled_back": 0}


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def rollout(**changes) -> dict:
    """A shadow rollout in progress, as ``Rollouts.status`` writes it."""
    document = {
        "model": "lane",
        "stage": "shadow",
        "policy": "shadow",
        "version": 2,
        "serving_version": 1,
        "started": STARTED,
        "samples": 37,
        "samples_wanted": 50,
        "agreed": 36,
        "agreement": 36 / 37,
        "errors": 0,
        "dropped": 0,
        "candidate_p95_ms": 4.104,
        "serving_p95_ms": 3.9,
        "last_disagreement": "",
        "gates": {"policy": "shadow", "samples": 50},
        "totals": TOTALS,
        "held": [],
    }
    document.update(changes)
    return document


def test_shadow_rollout_shows_progress_agreement_and_both_latencies():
    assert summary(rollout(dropped=3, last_disagreement="OUTPUT0 max |diff| 32.0")) == (
        "lane: shadow rollout of version 2 against version 1, since 2027-01-15 08:00:00\n"
        "  samples     37/50 (3 dropped while busy)\n"
        "  agreement   97.3% (36 of 37)\n"
        "  errors      0\n"
        "  p95         version 2 4.10 ms, version 1 3.90 ms\n"
        "  disagreed   OUTPUT0 max |diff| 32.0"
    )


def test_shadow_rollout_waiting_for_traffic_shows_dashes_for_missing_figures():
    document = rollout(samples=0, agreed=0, agreement=None, candidate_p95_ms=None)
    document["serving_p95_ms"] = None
    assert summary(document).splitlines()[1:] == [
        "  samples     0/50",
        "  agreement   - (0 of 0)",
        "  errors      0",
        "  p95         version 2 -, version 1 -",
    ]


def test_canary_rollout_has_no_agreement_line():
    document = rollout(stage="canary", policy="canary", agreed=0, agreement=None, errors=2)
    assert summary(document) == (
        "lane: canary rollout of version 2 against version 1, since 2027-01-15 08:00:00\n"
        "  samples     37/50\n"
        "  errors      2\n"
        "  p95         version 2 4.10 ms, version 1 3.90 ms"
    )


def test_watched_version_shows_its_watch_window_and_the_figures_it_was_promoted_on():
    document = rollout(
        stage="watching",
        samples=50,
        agreed=50,
        agreement=1.0,
        watch={"until": STARTED + 300, "requests": 12, "errors": 0, "p95_ms": 4.0},
        last={"version": 2, "result": "promoted", "reason": "50/50 agree", "at": STARTED + 60},
    )
    assert summary(document) == (
        "lane: version 2 promoted, watched until 2027-01-15 08:05:00; version 1 still loaded\n"
        "  watch       12 requests, 0 errors, p95 4.00 ms\n"
        "  samples     50/50\n"
        "  agreement   100.0% (50 of 50)\n"
        "  errors      0\n"
        "  p95         version 2 4.10 ms, version 1 3.90 ms\n"
        "  last        version 2 promoted at 2027-01-15 08:01:00: 50/50 agree"
    )


def test_no_rollout_shows_held_versions_with_their_reasons_and_the_last_outcome():
    aborted = "rollout: aborted by the operator"
    document = {
        "model": "lane",
        "stage": "none",
        "totals": TOTALS,
        "held": [
            {"version": 2, "kind": "rejected", "reason": aborted, "since": STARTED},
            {"version": 3, "kind": "quarantined", "reason": "the daemon died", "since": STARTED},
        ],
        "last": {"version": 2, "result": "rejected", "reason": aborted, "at": STARTED},
    }
    assert summary(document) == (
        "lane: no rollout in progress\n"
        "  held        version 2, rejected since 2027-01-15 08:00:00: "
        "rollout: aborted by the operator\n"
        "  held        version 3, quarantined since 2027-01-15 08:00:00: the daemon died\n"
        "  last        version 2 rejected at 2027-01-15 08:00:00: "
        "rollout: aborted by the operator"
    )


def test_list_of_rollouts_is_one_summary_each_a_blank_line_apart():
    text = summaries([rollout(), rollout(model="road")])
    first, second = text.split("\n\n")
    assert first.startswith("lane: shadow rollout of version 2")
    assert second.startswith("road: shadow rollout of version 2")


def test_empty_list_of_rollouts_says_so():
    assert summaries([]) == "no rollout in progress"
