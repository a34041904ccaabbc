"""The sampler's steps, driven by ``sample_once`` with a fake clock: tiers
filled at their own steps, bounded rings, series that come and go, the cap
on series, gaps, and the device's telemetry as means."""

from __future__ import annotations

import logging

import pytest

from edgebox.history.counters import MODEL_COLUMNS, CounterReading, IntervalCounts
from edgebox.history.sampler import HistorySampler
from edgebox.history.settings import HistorySettings
from fakes.fake_dashboard_sources import FakeTelemetry, fake_sample
from fakes.fake_history_sources import FakeClock, FakeStatisticsSource

MS = 1_000_000
STEP = 5.0


def make_sampler(statistics, telemetry=None, **fields) -> HistorySampler:
    return HistorySampler(statistics, telemetry, HistorySettings(**fields), path=None)


def run(sampler: HistorySampler, clock: FakeClock, steps: int, each=None) -> None:
    for index in range(steps):
        if each is not None:
            each(index)
        sampler.sample_once(clock.advance(STEP))


def column(points, name: str) -> list:
    index = MODEL_COLUMNS.index(name)
    return [point.value[index] for point in points]


def test_each_tier_gets_a_point_per_step_all_series_on_the_same_times():
    statistics = FakeStatisticsSource()
    a, b = statistics.serve("a"), statistics.serve("b", "2")
    clock = FakeClock()
    sampler = make_sampler(statistics)
    sampler.sample_once(clock.now)
    start = clock.now

    def traffic(index: int) -> None:
        for _ in range(index + 1):
            a.record_request(True, MS)
        b.record_request(False, MS)

    run(sampler, clock, 96, traffic)  # 480 s: one 24 h step
    store = sampler.store
    fine = dict(store.series("15m"))
    assert len(fine[("a", "1")]) == 96
    hour = dict(store.series("1h"))
    assert [p.timestamp - start for p in hour[("a", "1")]] == [20.0 * k for k in range(1, 25)]
    assert [p.timestamp for p in hour[("b", "2")]] == [p.timestamp for p in hour[("a", "1")]]
    day = dict(store.series("24h"))
    assert [p.timestamp - start for p in day[("a", "1")]] == [480.0]
    # The 1 h tier's first point holds the first 4 intervals: 1+2+3+4 requests in 20 s.
    assert column(hour[("a", "1")], "requests_per_s")[0] == pytest.approx(10 / 20)
    assert column(day[("b", "2")], "failures_per_s") == [pytest.approx(1 / STEP)]
    assert column(day[("a", "1")], "requests_per_s") == [pytest.approx(sum(range(1, 97)) / 480)]


def test_a_coarse_point_has_the_percentile_of_all_its_requests():
    statistics = FakeStatisticsSource()
    counters = statistics.serve("a")
    clock = FakeClock()
    sampler = make_sampler(statistics)
    sampler.sample_once(clock.now)
    first = CounterReading.of(counters.snapshot())
    latencies_ms = [1, 1, 1, 40]

    def traffic(index: int) -> None:
        for _ in range(20):
            counters.record_request(True, latencies_ms[index] * MS)

    run(sampler, clock, 4, traffic)
    whole = IntervalCounts.between(first, CounterReading.of(counters.snapshot()), 20.0)
    (point,) = dict(sampler.store.series("1h"))[("a", "1")]
    assert column([point], "p99_us") == [whole.figures()[MODEL_COLUMNS.index("p99_us")]]
    assert column([point], "p99_us")[0] > 30_000  # not a mean of the four p99s (~10 ms)


def test_rings_are_bounded_and_drop_the_oldest():
    statistics = FakeStatisticsSource()
    statistics.serve("a")
    clock = FakeClock()
    sampler = make_sampler(statistics)
    sampler.sample_once(clock.now)
    run(sampler, clock, 200)
    points = dict(sampler.store.series("15m"))[("a", "1")]
    assert len(points) == 180 == sampler.store.tiers["15m"].capacity
    assert points[-1].timestamp == clock.now
    assert points[0].timestamp == clock.now - 179 * STEP


def test_a_version_that_goes_away_stops_getting_points_and_is_forgotten_later():
    statistics = FakeStatisticsSource()
    statistics.serve("a")
    statistics.serve("a", "2")
    clock = FakeClock()
    sampler = make_sampler(statistics)
    sampler.sample_once(clock.now)
    run(sampler, clock, 4)
    del statistics.served[("a", "1")]
    run(sampler, clock, 4)
    fine = dict(sampler.store.series("15m"))
    assert len(fine[("a", "1")]) == 4
    assert len(fine[("a", "2")]) == 8
    assert sampler.store.versions_of("a") == {"1", "2"}
    run(sampler, clock, int(900 / STEP))
    assert ("a", "1") not in dict(sampler.store.series("15m"))
    assert ("a", "1") in dict(sampler.store.series("24h"))


def test_series_past_max_series_get_no_history_and_say_so(caplog):
    statistics = FakeStatisticsSource()
    for name in ("a", "b", "c"):
        statistics.serve(name)
    clock = FakeClock()
    sampler = make_sampler(statistics, max_series=2)
    sampler.sample_once(clock.now)
    with caplog.at_level(logging.WARNING, logger="edgebox.history"):
        run(sampler, clock, 3)
    assert sampler.store.model_names() == {"a", "b"}
    assert sampler.store.refused_series == 3
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "history: keeping 2 series (history.max_series) already; "
        "model 'c' version 1 and any further ones get no history"
    ]


def test_a_reading_after_a_gap_only_sets_a_new_baseline():
    statistics = FakeStatisticsSource()
    counters = statistics.serve("a")
    clock = FakeClock()
    sampler = make_sampler(statistics)
    assert sampler.sample_once(clock.now) is False
    assert sampler.sample_once(clock.advance(STEP)) is True
    for _ in range(100):
        counters.record_request(True, MS)
    assert sampler.sample_once(clock.advance(STEP * 10)) is False
    assert sampler.sample_once(clock.advance(-30)) is False  # the clock stepped back
    assert sampler.sample_once(clock.advance(STEP)) is True
    assert column(dict(sampler.store.series("15m"))[("a", "1")], "requests_per_s") == [0.0, 0.0]


def test_device_points_are_the_means_of_the_interval_telemetry_samples():
    statistics = FakeStatisticsSource()
    clock = FakeClock()
    samples = []
    telemetry = FakeTelemetry(samples)
    sampler = make_sampler(statistics, telemetry)
    sampler.sample_once(clock.now)
    start = clock.now

    def telemetry_thread(index: int) -> None:
        for second in range(index * 5 + 1, index * 5 + 6):
            samples.append(fake_sample(start + second, cpu_pct=float(second)))

    run(sampler, clock, 4, telemetry_thread)
    fine = sampler.store.device("15m")
    assert [p.value["cpu_pct"] for p in fine] == [3.0, 8.0, 13.0, 18.0]
    assert fine[0].value["gpu_load_pct"] == 40.0
    assert fine[0].value["temperature_c.tj"] == 51.5
    assert "total_power_mw" not in fine[0].value  # unknown stays out, never 0
    (hour,) = sampler.store.device("1h")
    assert hour.value["cpu_pct"] == pytest.approx(10.5)
