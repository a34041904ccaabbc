"""Each stream keeps its latest inferred frame with its result, for the
dashboard: the frame the model saw, the result it gave, replaced per frame."""

from __future__ import annotations

import numpy as np
from bus_waits import wait_for_event
from stream_models import FAKE_LANES, LANES_CONFIG, write_video

from daemon_process import wait_for
from edgebox.events import StreamLatency, StreamResult
from edgebox.streams.latest_frames import LatestFrames
from edgebox.streams.settings import StreamSettings
from model_fixtures import write_model


def result(stream: str, index: int) -> StreamResult:
    return StreamResult(
        stream=stream,
        model="m",
        model_version="1",
        frame_index=index,
        timestamp=0.0,
        frame_width=4,
        frame_height=2,
        latency=StreamLatency(1.0, 0.0, 1.0, 2.0),
        outputs={},
    )


def test_a_stream_has_no_frame_until_its_first_result():
    assert LatestFrames().get("cam") is None


def test_each_frame_replaces_the_last_without_a_copy():
    latest = LatestFrames()
    first, second = np.zeros((2, 4, 3), np.uint8), np.ones((2, 4, 3), np.uint8)
    latest.put(first, result("cam", 0))
    latest.put(second, result("cam", 1))
    latest.put(first, result("other", 7))
    kept = latest.get("cam")
    assert kept.image is second
    assert kept.result.frame_index == 1
    assert latest.get("other").result.frame_index == 7


def test_stream_manager_keeps_the_frame_the_model_saw_with_its_lanes(
    tmp_path, stack, run_streams
):
    write_model(tmp_path, "lanes", LANES_CONFIG.format(name="lanes"), {"1/model.py": FAKE_LANES})
    stack.manager.load_model("lanes")
    video = write_video(tmp_path / "road.avi", [90] * 3, width=200, height=100)
    results = stack.bus.subscribe(StreamResult)
    manager = run_streams(StreamSettings(name="road", source=str(video), model="lanes", fps=0))

    published = wait_for_event(results, what="a result")
    kept = wait_for(lambda: manager.latest_frames.get("road"), what="the latest frame")
    assert kept.image.shape == (100, 200, 3)
    assert abs(float(kept.image.mean()) - 90) <= 3  # MJPG is lossy
    assert kept.result.stream == "road"
    assert kept.result.frame_index >= published.frame_index
    assert len(kept.result.outputs["lanes"]) == 2
