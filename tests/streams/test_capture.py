"""The capture loop alone, on real files and on a fake camera clock: file
rewinds, reconnect with backoff, and fps pacing of live and paced sources."""

from __future__ import annotations

import os
import threading
import time

import pytest
from fake_sources import FAST_BACKOFF, FakeClock, FakeLiveCamera
from stream_models import level_of, write_video

from daemon_process import wait_for
from edgebox.backoff import Backoff
from edgebox.events import StreamState
from edgebox.streams.capture import CaptureLoop
from edgebox.streams.counters import StreamCounters
from edgebox.streams.frame_queue import FrameQueue
from edgebox.streams.source_spec import parse_source
from edgebox.streams.sources import open_source


class Reports:
    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.lock = threading.Lock()

    def __call__(self, state, reason, next_retry_at, attempt) -> None:
        with self.lock:
            self.items.append((state, reason, next_retry_at, attempt, time.time()))

    def snapshot(self) -> list[tuple]:
        with self.lock:
            return list(self.items)


def start_capture(source: str, fps: float, queue_size: int = 1000, **kwargs):
    queue = FrameQueue(queue_size)
    stop = threading.Event()
    reports = Reports()
    counters = StreamCounters()
    loop = CaptureLoop(
        "cam",
        parse_source(source),
        fps,
        queue,
        counters,
        stop,
        reports,
        open_source=kwargs.pop("open_source", open_source),
        backoff=kwargs.pop("backoff", FAST_BACKOFF),
        **kwargs,
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return queue, stop, reports, counters, thread


def take(queue: FrameQueue, count: int) -> list:
    frames = []
    for _ in range(count):
        frame = queue.get(timeout_s=10)
        assert frame is not None, f"only {len(frames)} frames arrived"
        frames.append(frame)
    return frames


def stop_capture(stop: threading.Event, queue: FrameQueue, thread: threading.Thread) -> None:
    stop.set()
    queue.close()
    thread.join(10)
    assert not thread.is_alive()


def test_video_file_that_ends_is_reopened_from_the_start(tmp_path):
    video = write_video(tmp_path / "five.avi", [10, 50, 90, 130, 170])
    queue, stop, reports, counters, thread = start_capture(str(video), fps=500)
    frames = take(queue, 12)
    stop_capture(stop, queue, thread)

    assert [level_of(f.image) for f in frames] == [10, 50, 90, 130, 170] * 2 + [10, 50]
    assert [f.index for f in frames] == list(range(12))
    assert queue.dropped == 0
    states = [item[0] for item in reports.snapshot()]
    assert StreamState.RECONNECTING not in states, "a rewind is not a failure"
    assert counters.reconnects == 0


def test_missing_file_reconnects_with_exponential_capped_backoff(tmp_path):
    missing = tmp_path / "later.avi"
    queue, stop, reports, counters, thread = start_capture(
        str(missing), fps=500, wall_clock=lambda: 1000.0
    )
    deadline = time.monotonic() + 10
    while len(reports.snapshot()) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    seen = reports.snapshot()[:5]
    assert len(seen) == 5, seen

    assert [s[0] for s in seen] == [StreamState.RECONNECTING] * 5
    assert {s[1] for s in seen} == {f"no such video file '{missing}'"}
    assert [s[3] for s in seen] == [1, 2, 3, 4, 5]
    assert [s[2] - 1000.0 for s in seen] == pytest.approx([0.01, 0.02, 0.04, 0.04, 0.04])

    # The file arrives: the same loop opens it, runs, and the attempt count resets.
    staged = write_video(tmp_path / ".later.avi", [200] * 3)
    os.rename(staged, missing)
    frame = queue.get(timeout_s=10)
    stop_capture(stop, queue, thread)
    assert frame is not None and level_of(frame.image) == 200
    assert (StreamState.RUNNING, "", None, 0) in [s[:4] for s in reports.snapshot()]
    assert counters.reconnects >= 5


def test_empty_video_file_is_a_failure_not_a_busy_loop(tmp_path):
    empty = write_video(tmp_path / "empty.avi", [])
    queue, stop, reports, _, thread = start_capture(
        str(empty), fps=0, backoff=Backoff(initial_s=0.05, max_s=0.05)
    )
    deadline = time.monotonic() + 10
    while len(reports.snapshot()) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    stop_capture(stop, queue, thread)
    first = reports.snapshot()[0]
    assert first[0] is StreamState.RECONNECTING
    assert first[1] in (
        f"video file '{empty}' ended before its first frame",
        f"cannot read video file '{empty}' (no OpenCV reader for its format)",
    )


def test_live_source_is_grabbed_at_its_pace_and_only_capped_frames_decoded():
    clock = FakeClock()
    camera = FakeLiveCamera(clock, camera_fps=30, frames=60)
    queue, stop, reports, counters, thread = start_capture(
        "/dev/video0",
        fps=15,
        open_source=lambda spec: camera,
        clock=clock,
        backoff=Backoff(initial_s=60, max_s=60),
    )
    deadline = time.monotonic() + 10
    while not reports.snapshot() or reports.snapshot()[-1][0] is not StreamState.RECONNECTING:
        assert time.monotonic() < deadline, "the fake camera never ran out"
        time.sleep(0.005)
    stop_capture(stop, queue, thread)

    assert len(camera.grabbed) == 60
    assert camera.retrieved == list(range(0, 60, 2)), "15 of every 30 frames, evenly"
    assert counters.frames_captured == 30
    assert camera.closed


def test_paced_source_is_read_no_faster_than_the_cap(tmp_path):
    video = write_video(tmp_path / "grey.avi", [100] * 30)
    queue, stop, _, _, thread = start_capture(str(video), fps=50)
    started = time.monotonic()
    frames = take(queue, 11)
    elapsed = time.monotonic() - started
    stop_capture(stop, queue, thread)
    assert len(frames) == 11
    assert elapsed >= 10 / 50 - 0.01, f"11 frames in {elapsed:.3f} s at a 50 fps cap"


def test_frames_pushed_out_of_a_full_queue_count_as_recent_drops():
    clock = FakeClock()
    camera = FakeLiveCamera(clock, camera_fps=30, frames=60)
    counters = StreamCounters(clock)
    queue: FrameQueue = FrameQueue(1)
    stop = threading.Event()
    reports = Reports()
    loop = CaptureLoop(
        "cam",
        parse_source("/dev/video0"),
        15,
        queue,
        counters,
        stop,
        reports,
        open_source=lambda spec: camera,
        backoff=Backoff(initial_s=60, max_s=60),
        clock=clock,
        wall_clock=lambda: 1234.5,
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    wait_for(
        lambda: reports.snapshot() and reports.snapshot()[-1][0] is StreamState.RECONNECTING,
        10,
        what="the fake camera to run out",
    )
    stop_capture(stop, queue, thread)

    # 30 frames kept by the 15 fps cap over the camera's 2 s, nobody taking
    # them from a one-frame queue: each but the first pushed one out.
    assert counters.frames_captured == 30
    assert (counters.captures.count(), counters.drops.count()) == (30, 29)
    assert counters.last_frame_at == 1234.5
