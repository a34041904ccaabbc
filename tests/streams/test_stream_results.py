"""Streams on a real in-process dataplane with python-backend models: what
reaches the bus, and that models missing, refusing frames or failing never
stop a stream."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from bus_waits import wait_for_event
from stream_models import (
    FAILING_ON_DARK,
    FAKE_LANES,
    FP32_CONFIG,
    GATED_PROBE,
    HOLDS_DARK_FRAMES,
    LANES_CONFIG,
    PAIR_CONFIG,
    SLOW_PROBE,
    write_frame_model,
    write_video,
)

from daemon_process import wait_for
from edgebox.events import StreamResult, StreamState, StreamStatus
from edgebox.streams.settings import StreamSettings
from fakes import blocking_gate
from model_fixtures import write_model


def test_results_reach_the_bus_with_version_and_latency(tmp_path, stack, run_streams):
    write_frame_model(tmp_path, "probe")
    stack.manager.load_model("probe")
    video = write_video(tmp_path / "grey.avi", [130] * 5)
    results = stack.bus.subscribe(StreamResult)
    before = time.time()
    run_streams(StreamSettings(name="cam", source=str(video), model="probe", fps=0))

    result = wait_for_event(results, what="a result")
    assert result.stream == "cam"
    assert result.model == "probe"
    assert result.model_version == "1"
    assert result.frame_index >= 0
    assert before <= result.timestamp <= time.time()
    assert (result.frame_width, result.frame_height) == (64, 48)
    assert result.outputs.keys() == {"level", "size"}
    assert abs(result.outputs["level"][0] - 130) <= 3  # MJPG is lossy
    assert result.outputs["size"] == [48, 64]
    latency = result.latency
    assert latency.capture_ms > 0 and latency.queue_ms >= 0 and latency.inference_ms > 0
    parts = latency.capture_ms + latency.queue_ms + latency.inference_ms
    assert parts <= latency.total_ms < parts + 1000
    # Read to published: the queue, the model and the summary, not the capture.
    assert latency.queue_ms + latency.inference_ms <= latency.result_ms
    assert latency.result_ms <= latency.total_ms - latency.capture_ms + 1000
    assert result.timestamp <= result.published_at <= time.time()
    assert result.published_at - result.timestamp >= latency.result_ms / 1e3 - 0.05
    document = json.loads(json.dumps(result.as_dict()))
    assert document["latency"].keys() == {
        "capture_ms",
        "queue_ms",
        "inference_ms",
        "total_ms",
        "result_ms",
    }
    assert document["model_version"] == "1"


def test_lane_outputs_are_decoded_into_lanes(tmp_path, stack, run_streams):
    write_model(tmp_path, "lanes", LANES_CONFIG.format(name="lanes"), {"1/model.py": FAKE_LANES})
    stack.manager.load_model("lanes")
    video = write_video(tmp_path / "road.avi", [90] * 3, width=200, height=100)
    results = stack.bus.subscribe(StreamResult)
    run_streams(StreamSettings(name="road", source=str(video), model="lanes", fps=0))

    result = wait_for_event(results, what="a result")
    assert result.outputs == {
        "lanes": [
            {"score": 0.9, "points": [[50.0, 99.0], [90.0, 50.0]]},
            {"score": 0.75, "points": [[150.0, 99.0], [120.0, 50.0], [110.0, 33.3]]},
        ]
    }


def test_slow_model_drops_the_oldest_frames_and_never_blocks_capture(tmp_path, stack, run_streams):
    write_frame_model(tmp_path, "slow", GATED_PROBE)
    stack.manager.load_model("slow")
    video = write_video(tmp_path / "grey.avi", [60] * 10)
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(
        StreamSettings(
            name="cam", source=str(video), model="slow", fps=200, queue_frames=2, in_flight=1
        )
    )
    assert blocking_gate.entered.wait(10), "the first frame never reached the model"

    held = wait_for(
        lambda: (s := manager.status()[0]).frames_dropped >= 10 and s,
        what="frames to be dropped while the model is held",
    )
    assert held.frames_inferred == 0
    assert held.frames_captured >= held.frames_dropped + 2

    blocking_gate.release.set()
    first = wait_for_event(results, what="the held frame's result")
    second = wait_for_event(results, what="the next result")
    assert first.frame_index == 0
    # Frames 1.. were dropped oldest-first while the model was held: the next
    # one inferred is one of the newest, not frame 1.
    assert second.frame_index > held.frames_dropped

    assert manager.stop(10)
    final = manager.status()[0]
    unaccounted = final.frames_captured - (
        final.frames_inferred + final.frames_dropped + final.inference_failures
    )
    assert 0 <= unaccounted <= 2, final


def test_two_frames_in_flight_overlap_yet_results_keep_frame_order(
    tmp_path, stack, run_streams
):
    write_model(
        tmp_path, "pair", PAIR_CONFIG.format(name="pair"), {"1/model.py": HOLDS_DARK_FRAMES}
    )
    stack.manager.load_model("pair")
    video = write_video(tmp_path / "dark_first.avi", [20] + [200] * 7)
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(
        StreamSettings(name="cam", source=str(video), model="pair", fps=0, in_flight=2)
    )
    assert blocking_gate.entered.wait(10), "the dark frame never reached the model"
    wait_for(
        lambda: blocking_gate.finalized,
        what="a bright frame to pass the model while the dark one is held",
    )
    assert manager.status()[0].frames_inferred == 0, "a later frame was published first"

    blocking_gate.release.set()
    seen = [wait_for_event(results, what=f"result {n}") for n in range(6)]
    assert seen[0].frame_index == 0 and seen[0].outputs["level"][0] < 100
    indices = [r.frame_index for r in seen]
    assert indices == sorted(indices) and len(set(indices)) == len(indices), indices


def test_uncapped_video_file_has_every_frame_inferred_in_order(tmp_path, stack, run_streams):
    write_frame_model(tmp_path, "slow", SLOW_PROBE)
    stack.manager.load_model("slow")
    video = write_video(tmp_path / "five.avi", [10, 50, 90, 130, 170])
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="slow", fps=0))

    seen = [wait_for_event(results, what=f"result {n}") for n in range(12)]
    assert [r.frame_index for r in seen] == list(range(12))
    levels = [round(r.outputs["level"][0] / 10) * 10 for r in seen]
    assert levels == [10, 50, 90, 130, 170] * 2 + [10, 50]
    assert manager.status()[0].frames_dropped == 0


def test_model_not_loaded_yet_is_counted_and_the_stream_recovers(tmp_path, stack, run_streams):
    video = write_video(tmp_path / "grey.avi", [100] * 5)
    statuses = stack.bus.subscribe(StreamStatus)
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="late", fps=100))

    error = wait_for_event(
        statuses, lambda s: s.state is StreamState.MODEL_ERROR, what="model_error"
    )
    assert error.reason == "Request for unknown model: 'late' is not found"
    wait_for(lambda: manager.status()[0].inference_failures >= 3, what="failures to be counted")

    write_frame_model(tmp_path, "late")
    stack.manager.load_model("late")
    assert wait_for_event(results, what="a result once loaded").model_version == "1"
    wait_for_event(statuses, lambda s: s.state is StreamState.RUNNING, what="running again")
    assert manager.status()[0].state is StreamState.RUNNING


def test_missing_model_does_not_spin_an_uncapped_file_source(tmp_path, stack, run_streams):
    video = write_video(tmp_path / "grey.avi", [100] * 5)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="absent", fps=0))
    wait_for(lambda: manager.status()[0].inference_failures >= 2, what="first failures")
    started, count = time.monotonic(), manager.status()[0].inference_failures
    wait_for(lambda: manager.status()[0].inference_failures >= count + 5, what="5 more failures")
    assert time.monotonic() - started >= 0.4, "retried faster than 10 times a second"


def test_model_that_arrives_but_fails_leaves_model_error_for_running(tmp_path, stack, run_streams):
    video = write_video(tmp_path / "dark.avi", [40] * 5)
    statuses = stack.bus.subscribe(StreamStatus)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="picky", fps=100))
    wait_for_event(statuses, lambda s: s.state is StreamState.MODEL_ERROR, what="model_error")

    write_frame_model(tmp_path, "picky", FAILING_ON_DARK)
    stack.manager.load_model("picky")
    wait_for_event(statuses, lambda s: s.state is StreamState.RUNNING, what="running")
    failures = manager.status()[0].inference_failures
    wait_for(
        lambda: manager.status()[0].inference_failures > failures + 3,
        what="the loaded model's own failures to be counted",
    )
    status = manager.status()[0]
    assert (status.state, status.reason, status.frames_inferred) == (StreamState.RUNNING, "", 0)


def test_model_with_another_signature_is_refused_in_the_state(tmp_path, stack, run_streams):
    write_model(
        tmp_path,
        "fp",
        FP32_CONFIG.format(name="fp"),
        {
            "1/model.py": "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
        },
    )
    stack.manager.load_model("fp")
    video = write_video(tmp_path / "grey.avi", [100] * 5)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="fp", fps=100))

    status = wait_for(
        lambda: (s := manager.status()[0]).state is StreamState.MODEL_ERROR and s,
        what="model_error",
    )
    assert status.reason == (
        "model 'fp' does not take frames: expected one input of datatype UINT8 and shape "
        "[-1,-1,3], got 'pixels' FP32 [3,-1,-1]"
    )
    assert status.frames_inferred == 0


def test_inference_errors_are_counted_logged_rate_limited_and_do_not_stop_the_stream(
    tmp_path, stack, run_streams, caplog
):
    write_frame_model(tmp_path, "picky", FAILING_ON_DARK)
    stack.manager.load_model("picky")
    video = write_video(tmp_path / "mixed.avi", [40, 160] * 4)
    results = stack.bus.subscribe(StreamResult)
    caplog.set_level(logging.WARNING, logger="edgebox.streams")
    manager = run_streams(
        StreamSettings(
            name="cam",
            source=str(video),
            model="picky",
            fps=200,
            queue_frames=8,
            log_interval_s=3600,
        )
    )

    wait_for(lambda: manager.status()[0].inference_failures >= 10, what="10 failures")
    bright = wait_for_event(results, what="a result from a bright frame")
    assert abs(bright.outputs["level"][0] - 160) <= 3
    status = manager.status()[0]
    assert status.state is StreamState.RUNNING
    failure_lines = [r.getMessage() for r in caplog.records if "not inferred" in r.getMessage()]
    assert len(failure_lines) == 1, failure_lines
    assert "model 'picky' version 1" in failure_lines[0]
    assert "too dark to see" in failure_lines[0]


def test_hot_reload_swaps_the_version_under_a_running_stream(tmp_path, stack, run_streams):
    write_frame_model(tmp_path, "probe")
    stack.manager.load_model("probe")
    video = write_video(tmp_path / "grey.avi", [100] * 5)
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="probe", fps=100))
    assert wait_for_event(results, what="a result from version 1").model_version == "1"

    write_frame_model(tmp_path, "probe", version=2)
    stack.manager.load_model("probe")
    wait_for_event(results, lambda r: r.model_version == "2", what="a result from version 2")
    status = manager.status()[0]
    assert status.model_version == "2"
    assert status.inference_failures == 0


@pytest.mark.parametrize("fps", [0, 100])
def test_stop_ends_both_threads_and_publishes_stopped(tmp_path, stack, run_streams, fps):
    write_frame_model(tmp_path, "probe")
    stack.manager.load_model("probe")
    video = write_video(tmp_path / "grey.avi", [100] * 5)
    statuses = stack.bus.subscribe(StreamStatus)
    manager = run_streams(StreamSettings(name="cam", source=str(video), model="probe", fps=fps))
    wait_for(lambda: manager.status()[0].frames_inferred >= 3, what="results")

    assert manager.stop(5)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("stream-cam-")]
    stopped = wait_for_event(statuses, lambda s: s.state is StreamState.STOPPED, what="stopped")
    assert stopped.frames_inferred >= 3
    assert manager.status()[0].state is StreamState.STOPPED
