"""The JSON API's shapes (docs/dashboard.md), read anonymously: overview,
telemetry, models, streams with their latest frame, events."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
from dashboard_client import dashboard_deps

from daemon_process import wait_for
from edgebox import __version__
from edgebox.events import ModelStateChanged, StreamResult
from edgebox.lifecycle.states import ModelState
from edgebox.mqtt.link_stats import MqttStats
from edgebox.streams.manager import StreamManager
from edgebox.streams.settings import StreamSettings
from edgebox.tensors import InferRequest, Tensor
from fakes.fake_dashboard_sources import FakeMqttForwarder, FakeTelemetry, fake_sample
from model_fixtures import add_add_sub, write_model

FAKE_LANES_CONFIG = """
name: "lanes"
backend: "python"
max_batch_size: 0
input [ { name: "image" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] } ]
output [
  { name: "lane_scores" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "lane_points" data_type: TYPE_FP32 dims: [ -1, 2 ] },
  { name: "lane_point_counts" data_type: TYPE_INT32 dims: [ -1 ] }
]
parameters { key: "result_summary" value { string_value: "lanes" } }
"""
DIAGONAL_LANE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        image = pb_utils.get_input_tensor_by_name(requests[0], "image").as_numpy()
        height, width = image.shape[:2]
        points = np.array([[0, 0], [width - 1, height - 1]], dtype=np.float32)
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("lane_scores", np.array([0.9], dtype=np.float32)),
            pb_utils.Tensor("lane_points", points),
            pb_utils.Tensor("lane_point_counts", np.array([2], dtype=np.int32)),
        ])]
"""
"""One lane, corner to corner, on whatever frame it is given."""


class BlackFrames:
    """A synthetic source of black 160x120 frames, as many as asked for."""

    def __init__(self) -> None:
        self.index = 0

    def grab(self) -> bool:
        return True

    def retrieve(self):
        self.index += 1
        return np.zeros((120, 160, 3), np.uint8)

    def close(self) -> None:
        pass


def get(client, path: str):
    reply = client.get(path)
    assert reply.status_code == 200, (path, reply.data)
    return reply.get_json()


def test_overview_shape_with_telemetry_and_mqtt(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    add_add_sub(tmp_path, "unloaded")
    stack.manager.load_model("add_sub")
    telemetry = FakeTelemetry([fake_sample(1000.0), fake_sample(1001.0, cpu_pct=30.0)])
    stats = MqttStats(state="connected", broker="mqtt://127.0.0.1:1883", sent=5, acknowledged=5)
    deps = dashboard_deps(stack, telemetry=telemetry, mqtt=FakeMqttForwarder(stats))
    document = get(make_app(deps=deps, anonymous_read=True).test_client(), "/api/v1/overview")

    device = document["device"]
    assert list(device) == [
        "model",
        "l4t",
        "jetpack",
        "power_mode",
        "uptime_s",
        "edgebox_version",
        "edgebox_uptime_s",
        "hostname",
    ]
    assert device["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert (device["l4t"], device["jetpack"], device["power_mode"]) == ("36.3.0", "6.0", "MAXN")
    assert device["edgebox_version"] == __version__
    assert device["uptime_s"] > 0 and device["edgebox_uptime_s"] >= 0
    assert document["telemetry"]["timestamp"] == 1001.0
    assert document["telemetry"]["cpu_pct"] == 30.0
    assert document["telemetry"]["gpu"]["load_pct"] == 40.0
    assert document["mqtt"]["state"] == "connected"
    assert document["mqtt"]["sent"] == 5
    assert document["models"] == {"ready": 1, "total": 2}
    assert document["streams"] == 0


def test_overview_without_telemetry_or_mqtt_says_null(stack, make_app):
    document = get(make_app(anonymous_read=True).test_client(), "/api/v1/overview")
    assert document["telemetry"] is None
    assert document["mqtt"] is None
    assert document["device"]["model"] is None
    assert document["device"]["power_mode"] is None
    assert document["models"] == {"ready": 0, "total": 0}


def test_telemetry_history_oldest_first_within_the_seconds_asked(stack, make_app):
    samples = [fake_sample(1000.0 + n, cpu_pct=float(n)) for n in range(10)]
    deps = dashboard_deps(stack, telemetry=FakeTelemetry(samples))
    client = make_app(deps=deps, anonymous_read=True).test_client()
    document = get(client, "/api/v1/telemetry?seconds=3")
    assert [s["cpu_pct"] for s in document["samples"]] == [6.0, 7.0, 8.0, 9.0]
    assert len(get(client, "/api/v1/telemetry")["samples"]) == 10


def test_telemetry_off_says_so(make_app):
    document = get(make_app(anonymous_read=True).test_client(), "/api/v1/telemetry")
    assert document == {"samples": [], "reason": "telemetry off"}


@pytest.mark.parametrize("seconds", ["0", "-5", "abc", "nan", "100000"])
def test_telemetry_refuses_a_bad_window(make_app, seconds):
    reply = make_app(anonymous_read=True).test_client().get(f"/api/v1/telemetry?seconds={seconds}")
    assert reply.status_code == 400
    assert reply.get_json() == {
        "error": f"'seconds': expected a number of seconds 1..86400, got '{seconds}'"
    }


def test_models_list_versions_device_and_statistics(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    write_model(tmp_path, "never_loaded", "name: 'never_loaded'\nbackend: 'python'\n")
    stack.manager.load_model("add_sub")
    request = np.ones(16, dtype=np.float32)
    for _ in range(3):
        stack.dataplane.infer(
            InferRequest(
                "add_sub",
                [Tensor("INPUT0", "FP32", request[None]), Tensor("INPUT1", "FP32", request[None])],
            )
        )
    document = get(make_app(anonymous_read=True).test_client(), "/api/v1/models")

    assert document["control_mode"] == "explicit"
    by_name = {model["name"]: model for model in document["models"]}
    assert list(by_name) == ["add_sub", "never_loaded"]
    add_sub = by_name["add_sub"]
    assert add_sub["platform"] == "onnxruntime_onnx"
    assert add_sub["last_error"] is None
    [version] = add_sub["versions"]
    assert (version["version"], version["state"], version["reason"]) == ("1", "READY", "")
    assert version["device"] == "auto"  # no instance_group: the backend picks
    assert isinstance(version["notes"], list)
    stats = add_sub["stats"]
    assert (stats["requests_success"], stats["requests_failure"]) == (3, 0)
    assert stats["inference_count"] == 3
    assert stats["mean_request_us"] > 0
    assert 0 < stats["p50_us"] <= stats["p99_us"]
    assert stats["p99_us"] <= stats["mean_request_us"] * 3 * 1.25  # 3 requests: max <= 3 x mean
    assert stats["batch_sizes"] == [{"batch_size": 1, "executions": 3}]
    assert by_name["never_loaded"] == {
        "name": "never_loaded",
        "platform": None,
        "versions": [],
        "stats": by_name["never_loaded"]["stats"],
        "last_error": None,
        "rollout": {
            "model": "never_loaded",
            "stage": "none",
            "totals": {
                "samples": 0,
                "dropped": 0,
                "promoted": 0,
                "rejected": 0,
                "rolled_back": 0,
                "quarantined": 0,
            },
            "held": [],
        },
        "used_by": [],
    }
    assert by_name["never_loaded"]["stats"]["requests_success"] == 0
    assert by_name["never_loaded"]["stats"]["mean_request_us"] is None
    assert by_name["never_loaded"]["stats"]["p50_us"] is None
    assert by_name["never_loaded"]["stats"]["p99_us"] is None


def test_models_show_the_last_error_seen(stack, make_app):
    app = make_app(anonymous_read=True)
    ring = app.extensions["edgebox.dashboard"].events
    ring.start()
    stack.registry.set_status("broken", 1, ModelState.UNAVAILABLE, "model.py raised")
    wait_for(lambda: ring.last_error("broken"), what="the ring to see the failure")
    [model] = get(app.test_client(), "/api/v1/models")["models"]
    assert model["name"] == "broken"
    assert model["last_error"] == "model.py raised"


def test_events_after_an_id(stack, make_app):
    app = make_app(anonymous_read=True)
    app.extensions["edgebox.dashboard"].events.start()
    client = app.test_client()
    for version in (1, 2, 3):
        stack.bus.publish(ModelStateChanged("m", version, "READY"))
    wait_for(lambda: get(client, "/api/v1/events")["last_id"] == 3, what="three events")
    document = get(client, "/api/v1/events")
    assert [e["id"] for e in document["events"]] == [1, 2, 3]
    first = document["events"][0]
    assert first["schema"] == {"name": "edgebox.model_state", "version": 1}
    assert (first["model"], first["version"], first["state"]) == ("m", 1, "READY")
    assert abs(first["time"] - time.time()) < 60
    later = get(client, "/api/v1/events?after=2")
    assert [e["version"] for e in later["events"]] == [3]
    assert later["last_id"] == 3
    bad = client.get("/api/v1/events?after=x")
    assert (bad.status_code, bad.get_json()) == (
        400,
        {"error": "'after': expected an event id (an integer), got 'x'"},
    )


def test_streams_and_their_latest_frame_with_the_lane_drawn(tmp_path, stack, make_app):
    write_model(tmp_path, "lanes", FAKE_LANES_CONFIG, {"1/model.py": DIAGONAL_LANE})
    manager = StreamManager(
        [StreamSettings(name="road", source="synthetic:road", model="lanes", fps=0)],
        stack.dataplane,
        stack.bus,
        open_source=lambda spec: BlackFrames(),
    )
    deps = dashboard_deps(stack, streams=manager, frames=manager.latest_frames)
    client = make_app(deps=deps, anonymous_read=True).test_client()
    results = stack.bus.subscribe(StreamResult)
    manager.start()
    try:
        # Before the model is loaded: the stream runs but has no result yet.
        [listed] = get(client, "/api/v1/streams")["streams"]
        assert listed["name"] == "road"
        assert listed["latency"] is None and listed["frame_index"] is None
        assert listed["frame_url"] == "/api/v1/streams/road/frame.jpg"
        missing = client.get("/api/v1/streams/road/frame.jpg")
        assert (missing.status_code, missing.get_json()) == (
            404,
            {"error": "stream 'road' has no inferred frame yet"},
        )

        stack.manager.load_model("lanes")
        assert results.get(timeout=20) is not None
        reply = client.get("/api/v1/streams/road/frame.jpg")
        assert reply.status_code == 200
        assert reply.mimetype == "image/jpeg"
        assert reply.headers["Cache-Control"] == "no-store"
        image = cv2.imdecode(np.frombuffer(reply.data, np.uint8), cv2.IMREAD_COLOR)
        assert image.shape == (120, 160, 3)
        assert image[60, 80].max() > 100, "the lane is drawn across the middle"
        assert image[10, 150].max() < 40, "away from the lane the frame stays black"

        [listed] = get(client, "/api/v1/streams")["streams"]
        assert listed["state"] == "running"
        assert listed["frame_index"] >= 0
        assert set(listed["latency"]) == {
            "capture_ms",
            "queue_ms",
            "inference_ms",
            "total_ms",
            "result_ms",
        }
        distribution = listed["result_latency"]
        assert distribution["count"] >= 1
        assert distribution["p50_ms"] <= distribution["p99_ms"] <= distribution["max_ms"]
        assert sum(count for _, count in distribution["buckets"]) == distribution["count"]
        unknown = client.get("/api/v1/streams/nope/frame.jpg")
        assert (unknown.status_code, unknown.get_json()) == (
            404,
            {"error": "unknown stream 'nope'"},
        )
    finally:
        assert manager.stop(10)
