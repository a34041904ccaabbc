"""The Streams page's data: each stream's health and recent rates in
/api/v1/streams, and its latest frame as a snapshot download."""

from __future__ import annotations

import calendar
import re
import time

import cv2
import numpy as np
import pytest
from dashboard_client import dashboard_deps
from test_dashboard_api import DIAGONAL_LANE, FAKE_LANES_CONFIG, BlackFrames, get

from edgebox.events import StreamResult
from edgebox.streams.manager import StreamManager
from edgebox.streams.settings import StreamSettings
from model_fixtures import write_model


@pytest.fixture
def road(tmp_path, stack, make_app):
    """A client over stream 'road' (black frames at 20 fps into the model
    'lanes', not loaded yet), and the manager running it."""
    write_model(tmp_path, "lanes", FAKE_LANES_CONFIG, {"1/model.py": DIAGONAL_LANE})
    manager = StreamManager(
        [StreamSettings(name="road", source="synthetic:road", model="lanes", fps=20)],
        stack.dataplane,
        stack.bus,
        open_source=lambda spec: BlackFrames(),
    )
    deps = dashboard_deps(
        stack, streams=manager, frames=manager.latest_frames, stream_health=manager
    )
    client = make_app(deps=deps, anonymous_read=True).test_client()
    manager.start()
    yield client, manager
    assert manager.stop(10)


def test_streams_list_health_configured_and_achieved_fps_and_last_frame(stack, road):
    client, _ = road
    results = stack.bus.subscribe(StreamResult)
    [listed] = get(client, "/api/v1/streams")["streams"]
    health = listed["health"]
    assert health["fps_configured"] == 20
    assert health["health"] in ("reconnecting", "healthy", "down")
    assert listed["snapshot_url"] == "/api/v1/streams/road/snapshot.jpg"

    stack.manager.load_model("lanes")
    assert results.get(timeout=20) is not None
    [listed] = get(client, "/api/v1/streams")["streams"]
    health = listed["health"]
    assert listed["state"] == "running"
    assert health["fps_achieved"] > 0
    assert health["capture_fps"] > 0
    assert health["window_s"] == 5.0
    assert 0 <= health["last_frame_age_s"] < 5
    assert abs(health["last_frame_at"] - time.time()) < 5
    assert health["changes"], "the first judgement is in the history"
    newest = health["changes"][0]
    assert newest["health"] == health["health"]
    assert set(newest) == {"at", "health", "reason"}


def test_stream_without_an_fps_cap_has_no_configured_fps(stack, make_app):
    manager = StreamManager(
        [StreamSettings(name="free", source="synthetic:road", model="lanes", fps=0)],
        stack.dataplane,
        stack.bus,
        open_source=lambda spec: BlackFrames(),
    )
    deps = dashboard_deps(stack, streams=manager, stream_health=manager)
    client = make_app(deps=deps, anonymous_read=True).test_client()
    [listed] = get(client, "/api/v1/streams")["streams"]
    assert listed["health"]["fps_configured"] is None
    assert listed["health"]["last_frame_at"] is None
    assert listed["health"]["last_frame_age_s"] is None


def test_snapshot_is_the_latest_frame_as_a_named_jpeg_download(stack, road):
    client, _ = road
    results = stack.bus.subscribe(StreamResult)
    stack.manager.load_model("lanes")
    result = results.get(timeout=20)
    assert result is not None
    reply = client.get("/api/v1/streams/road/snapshot.jpg")
    assert reply.status_code == 200
    assert reply.mimetype == "image/jpeg"
    assert reply.headers["Cache-Control"] == "no-store"
    disposition = reply.headers["Content-Disposition"]
    match = re.fullmatch(r'attachment; filename="road-(\d{8}T\d{6}Z)\.jpg"', disposition)
    assert match, disposition
    stamp = calendar.timegm(time.strptime(match.group(1), "%Y%m%dT%H%M%SZ"))
    assert abs(stamp - result.timestamp) < 10
    image = cv2.imdecode(np.frombuffer(reply.data, np.uint8), cv2.IMREAD_COLOR)
    assert image.shape == (120, 160, 3)
    assert image[60, 80].max() > 100, "the lane is drawn, as on the page"


def test_snapshot_before_any_frame_is_a_conflict_that_says_so(road):
    client, _ = road
    reply = client.get("/api/v1/streams/road/snapshot.jpg")
    assert (reply.status_code, reply.get_json()) == (
        409,
        {"error": "stream 'road' has no frame yet; try again once the page shows one"},
    )


def test_snapshot_of_an_unknown_stream_is_not_found(road):
    client, _ = road
    reply = client.get("/api/v1/streams/nope/snapshot.jpg")
    assert (reply.status_code, reply.get_json()) == (404, {"error": "unknown stream 'nope'"})


@pytest.mark.parametrize(
    "name", ["<script>alert(1)<", "-road", "a" * 65, "road%22%3B%20x", "r%C3%B6ad", "%20"]
)
@pytest.mark.parametrize("image", ["snapshot.jpg", "frame.jpg"])
def test_stream_images_refuse_a_name_no_stream_can_have(road, name, image):
    client, _ = road
    reply = client.get(f"/api/v1/streams/{name}/{image}")
    assert reply.status_code == 400
    assert reply.get_json()["error"].endswith(
        "expected letters, digits, '_', '.' and '-' (64 at most, starting with a letter or digit)"
    )
    assert "Content-Disposition" not in reply.headers
