"""A stream's fps is what it does over the last window, on a fake clock."""

from __future__ import annotations

import pytest
from fake_sources import FakeClock

from edgebox.streams.recent_rate import RecentRate


def events(rate: RecentRate, clock: FakeClock, count: int, every_s: float) -> None:
    for _ in range(count):
        clock.now += every_s
        rate.record()


def test_rate_is_counted_over_the_window_not_since_start():
    clock = FakeClock()
    rate = RecentRate(window_s=5.0, clock=clock)
    events(rate, clock, 160, 0.0625)  # 10 s at 16 a second
    events(rate, clock, 20, 0.25)  # then 5 s at 4 a second
    assert rate.per_s() == pytest.approx(4.0)
    assert rate.count() == 20


def test_a_young_rate_is_measured_over_its_age():
    clock = FakeClock()
    rate = RecentRate(window_s=5.0, clock=clock)
    events(rate, clock, 8, 0.125)  # 1 s old, 8 events
    assert rate.per_s() == pytest.approx(8.0)


def test_rate_falls_to_zero_a_window_after_the_last_event():
    clock = FakeClock()
    rate = RecentRate(window_s=5.0, clock=clock)
    events(rate, clock, 20, 0.25)
    clock.now += 2.5
    assert rate.per_s() == pytest.approx(10 / 5.0)
    clock.now += 2.5
    assert (rate.per_s(), rate.count()) == (0.0, 0)


def test_above_the_cap_the_rate_is_measured_over_the_times_kept():
    clock = FakeClock()
    rate = RecentRate(window_s=5.0, clock=clock, max_events=100)
    events(rate, clock, 512, 0.0078125)  # 128 a second, 100 kept: under a second's worth
    assert rate.per_s() == pytest.approx(128.0, rel=0.02)
