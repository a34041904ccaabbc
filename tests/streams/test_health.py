"""A stream's health badge: judged from its state and recent rates, with a
bounded history of changes, on a fake clock."""

from __future__ import annotations

import dataclasses

import pytest

from edgebox.events import StreamState
from edgebox.streams.health import (
    DOWN_AFTER_ATTEMPTS,
    MAX_CHANGES,
    Health,
    HealthTracker,
    Signals,
    judge,
)

FLOWING = Signals(
    state=StreamState.RUNNING,
    reason="",
    attempt=0,
    fps_configured=15.0,
    fps_achieved=14.8,
    captured_recently=75,
    dropped_recently=0,
    window_s=5.0,
)


def running(**changed) -> Signals:
    return dataclasses.replace(FLOWING, **changed)


def test_a_stream_at_its_configured_fps_without_drops_is_healthy():
    assert judge(FLOWING, settled=True).health is Health.HEALTHY


def test_achieved_fps_well_below_configured_is_degraded_and_says_both():
    verdict = judge(running(fps_achieved=6.0), settled=True)
    assert (verdict.health, verdict.reason) == (Health.DEGRADED, "6.0 fps of the 15 configured")


def test_rising_drops_are_degraded_even_at_full_fps():
    verdict = judge(running(dropped_recently=20), settled=True)
    assert verdict.health is Health.DEGRADED
    assert verdict.reason.startswith("20 of 75 frames dropped in the last 5 s")


def test_a_single_drop_is_jitter_not_degradation():
    assert judge(running(dropped_recently=1), settled=True).health is Health.HEALTHY


def test_without_an_fps_cap_only_drops_count():
    assert judge(running(fps_configured=None, fps_achieved=1.0), settled=True).health is (
        Health.HEALTHY
    )


def test_rates_do_not_count_until_a_whole_window_has_run():
    assert judge(running(fps_achieved=1.0, dropped_recently=30), settled=False).health is (
        Health.HEALTHY
    )


def test_no_frame_for_a_window_is_down():
    verdict = judge(running(captured_recently=0, fps_achieved=0.0), settled=True)
    assert (verdict.health, verdict.reason) == (
        Health.DOWN,
        "no frame from the source in the last 5 s",
    )


@pytest.mark.parametrize(
    ("state", "attempt", "health", "reason"),
    [
        (StreamState.STARTING, 0, Health.RECONNECTING, "opening 'cam'"),
        (StreamState.RECONNECTING, 1, Health.RECONNECTING, "cam gone"),
        (
            StreamState.RECONNECTING,
            DOWN_AFTER_ATTEMPTS,
            Health.DOWN,
            f"the source failed {DOWN_AFTER_ATTEMPTS} times in a row: cam gone",
        ),
        (StreamState.MODEL_ERROR, 0, Health.DOWN, "model 'lanes' is not ready"),
        (StreamState.STOPPED, 0, Health.DOWN, "stopped"),
    ],
)
def test_states_without_results(state, attempt, health, reason):
    given = {
        StreamState.STARTING: "opening 'cam'",
        StreamState.RECONNECTING: "cam gone",
        StreamState.MODEL_ERROR: "model 'lanes' is not ready",
        StreamState.STOPPED: "",
    }[state]
    verdict = judge(running(state=state, attempt=attempt, reason=given), settled=True)
    assert (verdict.health, verdict.reason) == (health, reason)


def test_tracker_settles_a_window_after_running_starts_and_again_after_a_reconnect():
    tracker = HealthTracker()
    slow = running(fps_achieved=3.0)
    assert tracker.observe(slow, now=0.0, wall_now=1000.0).health is Health.HEALTHY
    assert tracker.observe(slow, now=4.9, wall_now=1004.9).health is Health.HEALTHY
    assert tracker.observe(slow, now=5.0, wall_now=1005.0).health is Health.DEGRADED
    lost = running(state=StreamState.RECONNECTING, attempt=1, reason="cam gone")
    assert tracker.observe(lost, now=6.0, wall_now=1006.0).health is Health.RECONNECTING
    assert tracker.observe(slow, now=7.0, wall_now=1007.0).health is Health.HEALTHY
    assert [(c.at, c.health) for c in tracker.changes()] == [
        (1000.0, Health.HEALTHY),
        (1005.0, Health.DEGRADED),
        (1006.0, Health.RECONNECTING),
        (1007.0, Health.HEALTHY),
    ]


def test_tracker_records_changes_of_health_not_of_reason_alone():
    tracker = HealthTracker()
    tracker.observe(running(fps_achieved=3.0), now=0.0, wall_now=0.0)
    tracker.observe(running(fps_achieved=3.0), now=10.0, wall_now=10.0)
    tracker.observe(running(fps_achieved=4.0), now=11.0, wall_now=11.0)
    assert [c.health for c in tracker.changes()] == [Health.HEALTHY, Health.DEGRADED]


def test_tracker_history_is_bounded_oldest_dropped_first():
    tracker = HealthTracker()
    lost = running(state=StreamState.RECONNECTING, attempt=1, reason="cam gone")
    for second in range(3 * MAX_CHANGES):
        signals = lost if second % 2 else FLOWING
        tracker.observe(signals, now=float(second), wall_now=float(second))
    changes = tracker.changes()
    assert len(changes) == MAX_CHANGES
    assert changes[-1].at == 3 * MAX_CHANGES - 1
    assert changes[0].at == 2 * MAX_CHANGES
