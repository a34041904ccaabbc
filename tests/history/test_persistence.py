"""The 1 h and 24 h tiers on disk: a round trip through a restart, files
that are not ours ignored without a crash, and the bytes written per hour
held under the bound docs/dashboard.md states for eMMC."""

from __future__ import annotations

import gzip
import json
import logging
import random

import pytest

from edgebox.history import persistence
from edgebox.history.counters import MODEL_COLUMNS
from edgebox.history.device import FIXED_COLUMNS, MAX_NAMED_COLUMNS
from edgebox.history.sampler import HistorySampler
from edgebox.history.settings import HistorySettings
from edgebox.history.store import HistoryStore
from edgebox.history.tiers import PERSISTED, Point, tiers_for
from fakes.fake_dashboard_sources import FakeTelemetry, fake_sample
from fakes.fake_history_sources import FakeClock, FakeStatisticsSource

MS = 1_000_000
MAX_BYTES_PER_HOUR = 6 * 1024 * 1024
"""docs/dashboard.md, "History": at most 6 MiB an hour at the defaults, with
every series and sensor slot in use."""


def sampler_with_traffic(path, clock, statistics, samples) -> HistorySampler:
    counters = statistics.serve("lane", "3")
    sampler = HistorySampler(statistics, FakeTelemetry(samples), HistorySettings(), path, clock)
    sampler.sample_once(clock.now)
    for index in range(240):  # 20 minutes: 60 points at 1 h, 2 at 24 h
        for _ in range(index % 7):
            counters.record_request(True, (index % 5 + 1) * MS)
        samples.append(fake_sample(clock.now + 1, cpu_pct=float(index % 50)))
        sampler.sample_once(clock.advance(5.0))
    return sampler


def test_the_coarse_tiers_survive_a_restart(tmp_path):
    path = tmp_path / "state" / persistence.FILE_NAME
    clock = FakeClock()
    before = sampler_with_traffic(path, clock, FakeStatisticsSource(), [])
    assert before.stop(1.0)
    assert path.exists()
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    clock.advance(60)
    after = HistorySampler(FakeStatisticsSource(), None, HistorySettings(), path, clock)
    assert after.load()
    for tier in PERSISTED:
        assert after.store.series(tier) == before.store.series(tier)
        assert after.store.device(tier) == before.store.device(tier)
        assert len(after.store.series(tier)[0][1]) > 0
    assert after.store.series("15m") == []
    assert before.store.series("15m") != []


def test_points_older_than_their_tier_are_dropped_at_load(tmp_path):
    path = tmp_path / persistence.FILE_NAME
    clock = FakeClock()
    before = sampler_with_traffic(path, clock, FakeStatisticsSource(), [])
    before.persist(clock.now)
    clock.advance(3600 - 10 * 20)  # the 1 h tier's newest 10 points are still in its hour
    after = HistorySampler(FakeStatisticsSource(), None, HistorySettings(), path, clock)
    after.load()
    (hour,) = after.store.series("1h")
    assert len(hour[1]) == 10  # the 11th newest is exactly an hour old: out
    (day,) = after.store.series("24h")
    assert len(day[1]) == 2


def garbage(path):
    path.write_bytes(b"\x00\xffnot a gzip at all")


def truncated(path):
    data = gzip.compress(b'{"format": "edgebox-history", "version": 1, "tiers": {}}')
    path.write_bytes(data[: len(data) // 2])


def not_json(path):
    path.write_bytes(gzip.compress(b"{this is not json"))


def foreign(path):
    path.write_bytes(gzip.compress(json.dumps({"generation": 3, "envelope": ""}).encode()))


def newer_version(path):
    document = {"format": "edgebox-history", "version": 99, "tiers": {}}
    path.write_bytes(gzip.compress(json.dumps(document).encode()))


def wrong_value(path):
    document = {
        "format": "edgebox-history",
        "version": 1,
        "model_columns": list(MODEL_COLUMNS),
        "tiers": {
            "1h": {
                "step_s": 20.0,
                "models": [
                    {"model": "a", "version": "1", "points": [[1.0, "x", 1, 1, 1, 1, 1, 1]]}
                ],
                "device": [],
            }
        },
    }
    path.write_bytes(gzip.compress(json.dumps(document).encode()))


def too_large(path):
    path.write_bytes(gzip.compress(b" " * (persistence.MAX_FILE_BYTES + 10)))


@pytest.mark.parametrize(
    ("write", "reason"),
    [
        (garbage, "not a readable gzip file"),
        (truncated, "not a readable gzip file"),
        (not_json, "not JSON"),
        (foreign, "not an edgebox history file"),
        (newer_version, "history file version 99, this edgebox reads 1"),
        (wrong_value, "expected a number, got 'x'"),
        (too_large, f"more than {persistence.MAX_FILE_BYTES} bytes unpacked"),
    ],
)
def test_a_file_that_is_not_a_usable_history_is_logged_and_ignored(tmp_path, caplog, write, reason):
    path = tmp_path / persistence.FILE_NAME
    write(path)
    sampler = HistorySampler(FakeStatisticsSource(), None, HistorySettings(), path, FakeClock())
    with caplog.at_level(logging.WARNING, logger="edgebox.history"):
        assert sampler.load() is False
    (message,) = [record.getMessage() for record in caplog.records]
    assert message.startswith(f"history: ignoring {path}: ")
    assert reason in message
    for tier in PERSISTED:
        assert sampler.store.series(tier) == []
    assert sampler.persist(1_750_000_000.0)  # and the next write replaces it
    assert persistence.load(path, HistoryStore(tiers_for(5.0), 32), 1_750_000_000.0)


def worst_case_store(settings: HistorySettings, now: float) -> HistoryStore:
    """Every series slot and sensor slot in use, every ring full, every value
    known and none alike (what compresses least)."""
    store = HistoryStore(tiers_for(settings.interval_s), settings.max_series)
    draw = random.Random(24)
    device_names = [
        *FIXED_COLUMNS,
        *(f"temperature_c.zone{n}" for n in range(MAX_NAMED_COLUMNS)),
        *(f"power_mw.VDD_RAIL_{n}" for n in range(MAX_NAMED_COLUMNS)),
    ]
    for name in PERSISTED:
        tier = store.tiers[name]
        times = [now - tier.step_s * k for k in range(tier.capacity - 1, -1, -1)]
        models = {
            (f"model_with_a_long_name_{n}", str(n % 3 + 1)): [
                Point(
                    t,
                    (
                        round(draw.uniform(0, 500), 3),
                        round(draw.uniform(0, 5), 3),
                        round(draw.uniform(100, 90_000), 1),
                        round(draw.uniform(100, 900_000), 1),
                        round(draw.uniform(0, 9_000), 1),
                        round(draw.uniform(100, 90_000), 1),
                        round(draw.uniform(1, 16), 2),
                    ),
                )
                for t in times
            ]
            for n in range(settings.max_series)
        }
        device = [
            Point(t, {column: round(draw.uniform(0, 60_000), 2) for column in device_names})
            for t in times
        ]
        store.restore(name, models, device)
    return store


def test_bytes_written_per_hour_stay_under_the_documented_bound(tmp_path):
    settings = HistorySettings()
    now = 1_750_000_000.0
    store = worst_case_store(settings, now)
    assert len(store.series("24h")) == settings.max_series
    size = len(persistence.encode(store, now))
    writes_per_hour = 3600 / settings.persist_interval_s + 1  # the cadence, and a stop
    assert size * writes_per_hour <= MAX_BYTES_PER_HOUR, (size, writes_per_hour)
    written = persistence.save(tmp_path / persistence.FILE_NAME, store, now)
    assert written == size == (tmp_path / persistence.FILE_NAME).stat().st_size
