"""``GET /api/v1/history``: JSON columns per series, the same values as CSV,
precise 400s for what it cannot answer, and the API's login rules."""

from __future__ import annotations

import csv
import io

import pytest
from dashboard_client import dashboard_deps, log_in

from edgebox.history.counters import MODEL_COLUMNS
from edgebox.history.sampler import HistorySampler
from edgebox.history.settings import HistorySettings
from fakes.fake_dashboard_sources import FakeTelemetry, fake_sample
from fakes.fake_history_sources import FakeClock, FakeStatisticsSource

MS = 1_000_000


@pytest.fixture
def sampled():
    """A sampler over two versions of 'lane' and a model named like a
    spreadsheet formula, 30 intervals of 5 s (8 points at 1 h)."""
    statistics = FakeStatisticsSource()
    lane_1, lane_2 = statistics.serve("lane", "1"), statistics.serve("lane", "2")
    statistics.serve("=HYPERLINK(1)")
    clock = FakeClock()
    samples = []
    sampler = HistorySampler(
        statistics, FakeTelemetry(samples), HistorySettings(), path=None, clock=clock
    )
    sampler.sample_once(clock.now)
    for index in range(32):
        for _ in range(index):
            lane_1.record_request(True, 2 * MS)
        lane_2.record_request(index % 2 == 0, 8 * MS)
        samples.append(fake_sample(clock.now + 1, cpu_pct=float(index)))
        sampler.sample_once(clock.advance(5.0))
    return sampler


@pytest.fixture
def client(stack, make_app, sampled):
    return make_app(deps=dashboard_deps(stack, history=sampled), anonymous_read=True).test_client()


def test_model_series_come_as_timestamps_and_named_columns(client, sampled):
    document = client.get("/api/v1/history?range=1h&model=lane").get_json()
    assert document["range"] == "1h"
    assert document["step_s"] == 20.0
    assert document["columns"] == list(MODEL_COLUMNS)
    assert [(s["model"], s["version"]) for s in document["models"]] == [
        ("lane", "1"),
        ("lane", "2"),
    ]
    (one, two) = document["models"]
    stored = dict(sampled.store.series("1h"))[("lane", "1")]
    assert one["timestamps"] == [point.timestamp for point in stored]
    assert len(one["timestamps"]) == 8
    assert one["values"]["requests_per_s"] == [point.value[0] for point in stored]
    assert one["timestamps"] == two["timestamps"]
    assert all(rate > 0 for rate in two["values"]["failures_per_s"])


def test_every_range_and_one_version(client):
    for chosen, step in (("15m", 5.0), ("1h", 20.0), ("24h", 480.0)):
        document = client.get(f"/api/v1/history?range={chosen}").get_json()
        assert (document["range"], document["step_s"]) == (chosen, step)
    only = client.get("/api/v1/history?model=lane&version=2").get_json()
    assert [(s["model"], s["version"]) for s in only["models"]] == [("lane", "2")]
    assert len(only["models"][0]["timestamps"]) == 32


def test_device_series(client):
    document = client.get("/api/v1/history?range=15m&series=device").get_json()
    assert document["columns"][:2] == ["cpu_pct", "gpu_load_pct"]
    assert "temperature_c.tj" in document["columns"]
    assert document["device"]["values"]["cpu_pct"][:3] == [0.0, 1.0, 2.0]
    assert len(document["device"]["timestamps"]) == 32


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("range=2h", "'range': expected one of 15m, 1h, 24h, got '2h'"),
        ("series=gpu", "'series': expected one of models, device, got 'gpu'"),
        ("format=xml", "'format': expected one of json, csv, got 'xml'"),
        (
            "model=nope",
            "'model': no history of model 'nope' (models with history: =HYPERLINK(1), lane)",
        ),
        ("model=lane&version=7", "'version': no history of model 'lane' version 7"),
        ("model=lane&version=x", "'version': expected a version number, got 'x'"),
        ("version=1", "'version' needs 'model'"),
        (
            "series=device&model=lane",
            "'model' and 'version' go with series=models, not series=device",
        ),
        ("range=1h&range=24h", "'range' given more than once"),
        ("window=1h", "unknown parameter 'window'; expected range, series, model, version, format"),
    ],
)
def test_what_cannot_be_answered_is_a_precise_400(client, query, message):
    reply = client.get(f"/api/v1/history?{query}")
    assert reply.status_code == 400
    assert reply.get_json() == {"error": message}


def test_csv_holds_exactly_the_json_values_with_a_header(client):
    document = client.get("/api/v1/history?range=1h&model=lane").get_json()
    reply = client.get("/api/v1/history?range=1h&model=lane&format=csv")
    assert reply.status_code == 200
    assert reply.mimetype == "text/csv"
    assert reply.headers["Content-Disposition"] == (
        'attachment; filename="edgebox-history-models-1h-lane.csv"'
    )
    rows = list(csv.reader(io.StringIO(reply.get_data(as_text=True))))
    assert rows[0] == ["time_utc", "timestamp", "model", "version", *MODEL_COLUMNS]
    expected = [
        [float(series["timestamps"][i]), series["model"], series["version"]]
        + [series["values"][c][i] for c in MODEL_COLUMNS]
        for series in document["models"]
        for i in range(len(series["timestamps"]))
    ]
    got = [
        [float(row[1]), row[2], row[3]] + [None if cell == "" else float(cell) for cell in row[4:]]
        for row in rows[1:]
    ]
    assert got == expected
    assert rows[1][0].endswith("+00:00")


def test_csv_of_the_device_and_names_that_look_like_formulas(client):
    device = list(
        csv.reader(
            io.StringIO(
                client.get("/api/v1/history?series=device&format=csv").get_data(as_text=True)
            )
        )
    )
    assert device[0][:4] == ["time_utc", "timestamp", "cpu_pct", "gpu_load_pct"]
    assert len(device) == 1 + 32
    models = client.get("/api/v1/history?format=csv").get_data(as_text=True)
    names = {row[2] for row in list(csv.reader(io.StringIO(models)))[1:]}
    assert names == {"'=HYPERLINK(1)", "lane"}


def test_history_needs_a_login_like_every_api_read(stack, make_app, sampled):
    client = make_app(deps=dashboard_deps(stack, history=sampled)).test_client()
    assert client.get("/api/v1/history").status_code == 401
    assert client.get("/api/v1/history?format=csv").status_code == 401
    log_in(client)
    assert client.get("/api/v1/history?format=csv").status_code == 200


def test_history_off_says_so(stack, make_app):
    client = make_app(deps=dashboard_deps(stack), anonymous_read=True).test_client()
    document = client.get("/api/v1/history?range=24h").get_json()
    assert document["reason"] == "history off"
    assert document["models"] == []
    reply = client.get("/api/v1/history?model=lane")
    assert reply.status_code == 400
    assert reply.get_json()["error"] == "'model': no history of model 'lane': history is off"
