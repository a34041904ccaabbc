"""Thresholds with a clear margin and a hold time: a reading hovering at a
threshold raises once and does not flap (edgebox/alerts/level.py)."""

from __future__ import annotations

import math

import pytest

from edgebox.alerts.level import LevelTracker


def levels(tracker: LevelTracker, readings, start: float = 0.0, step: float = 1.0) -> list:
    return [tracker.feed(value, start + step * i) for i, value in enumerate(readings)]


def test_warn_then_critical_as_soon_as_reached_without_a_hold_time():
    tracker = LevelTracker(80, 90, 3, 0)
    assert levels(tracker, [70, 80, 85, 90, 95]) == [None, "warn", "warn", "critical", "critical"]


def test_a_reading_hovering_at_the_threshold_does_not_flap():
    tracker = LevelTracker(80, 90, 3, 0)
    assert levels(tracker, [80.1, 79.9, 80.2, 77.5, 80.0]) == ["warn"] * 5


def test_each_level_clears_only_the_margin_below_its_threshold():
    tracker = LevelTracker(80, 90, 3, 0)
    assert levels(tracker, [95, 88, 87.1, 86.9, 78, 77.1, 76.9]) == [
        "critical",
        "critical",
        "critical",
        "warn",
        "warn",
        "warn",
        None,
    ]


def test_a_fall_past_both_margins_clears_at_once():
    tracker = LevelTracker(80, 90, 3, 0)
    assert levels(tracker, [95, 50]) == ["critical", None]


def test_the_hold_time_keeps_a_brief_peak_from_raising():
    tracker = LevelTracker(80, 90, 2, for_s=30)
    assert levels(tracker, [85, 85, 70, 85], step=10) == [None, None, None, None]
    assert tracker.feed(85, 40) is None
    assert tracker.feed(86, 60) == "warn"


def test_critical_needs_its_own_hold_time_and_warn_is_held_meanwhile():
    tracker = LevelTracker(80, 90, 2, for_s=10)
    assert levels(tracker, [85, 95, 95], step=10) == [None, "warn", "critical"]


def test_an_infinite_critical_makes_a_warn_only_tracker():
    tracker = LevelTracker(80, math.inf, 10, 0)
    assert levels(tracker, [100, 1e9, 71, 69]) == ["warn", "warn", "warn", None]
    assert tracker.describe() == "threshold 80"


def test_warn_must_be_below_critical():
    with pytest.raises(ValueError, match=r"expected warn \(90\) < critical \(90\)"):
        LevelTracker(90, 90, 1, 0)
