"""A frame from each configured stream's source, opened as the daemon opens
it: the synthetic road and a real video file pass with their size and
decoder, a missing camera fails with the reason the stream would show, and
a source that never answers fails at the deadline instead of hanging."""

from __future__ import annotations

import threading

import cv2
import numpy as np

from edgebox.selftest.cameras import camera_checks
from edgebox.selftest.report import Status
from edgebox.streams.settings import StreamSettings


def stream(name: str, source: str) -> StreamSettings:
    return StreamSettings(name=name, source=source, model="lane_pipeline")


def write_video(path, width=320, height=240, frames=5) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (width, height))
    for index in range(frames):
        writer.write(np.full((height, width, 3), index * 40, np.uint8))
    writer.release()


def test_the_synthetic_road_and_a_video_file_give_a_frame_of_their_size(tmp_path):
    video = tmp_path / "clip.avi"
    write_video(video)
    road, clip = camera_checks(
        [stream("road", "synthetic:road?width=800&height=450"), stream("clip", str(video))]
    )
    assert (road.status, road.facts["width"], road.facts["height"]) == (Status.PASS, 800, 450)
    assert (clip.status, clip.facts["width"], clip.facts["height"]) == (Status.PASS, 320, 240)
    assert "software" in clip.detail


def test_a_missing_camera_fails_with_the_reason_the_stream_would_give():
    (check,) = camera_checks([stream("front", "/dev/video99")])
    assert check.status is Status.FAIL
    assert "no such device '/dev/video99'" in check.detail


def test_a_file_that_is_no_video_fails(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 100)
    (check,) = camera_checks([stream("junk", str(junk))])
    assert check.status is Status.FAIL


class StuckOpenerFake:
    """Stands in for a capture stuck inside a library call: opening blocks
    until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, spec):
        self.release.wait(30)
        raise AssertionError("released")


def test_a_source_that_never_answers_fails_at_the_deadline():
    stuck = StuckOpenerFake()
    try:
        (check,) = camera_checks(
            [stream("door", "rtsp://user:secret@10.0.0.9/live")], opener=stuck, timeout_s=0.2
        )
    finally:
        stuck.release.set()
    assert check.status is Status.FAIL
    assert "no frame in 0.2 s" in check.detail
    assert "secret" not in check.detail


def test_no_streams_is_not_configured():
    (check,) = camera_checks([])
    assert check.status is Status.SKIPPED


class DecodingSourceFake:
    """An opened source that says who decodes it, as OpenCvSource does."""

    decoder = "the Orin's decoder (nvv4l2decoder)"

    def grab(self):
        return True

    def retrieve(self):
        return np.zeros((720, 1280, 3), np.uint8)

    def close(self):
        pass


def test_the_decoder_a_source_chose_is_reported():
    settings = StreamSettings(name="dock", source="rtsp://c/s", decode="hardware")
    opened = []

    def opener(spec):
        opened.append(spec.decode.value)
        return DecodingSourceFake()

    (check,) = camera_checks([settings], opener=opener)
    assert opened == ["hardware"]
    assert check.facts["decoder"] == "the Orin's decoder (nvv4l2decoder)"
    assert check.detail == "rtsp://c/s: a 1280x720 frame, the Orin's decoder (nvv4l2decoder)"


def test_hardware_decode_that_cannot_run_here_fails_with_the_pipeline_to_try():
    settings = StreamSettings(name="dock", source="rtsp://u:pw@127.0.0.1:9/s", decode="hardware")
    (check,) = camera_checks([settings])
    assert check.status is Status.FAIL
    assert check.detail.startswith("rtsp://u:***@127.0.0.1:9/s: decode: hardware cannot run here: ")
    assert check.facts["pipeline"] == (
        'rtspsrc location="rtsp://127.0.0.1:9/s" user-id=*** user-pw=*** protocols=tcp '
        "latency=0 drop-on-latency=true ! parsebin ! nvv4l2decoder enable-max-performance=true "
        "! nvvidconv ! video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR ! fakesink"
    )
    assert check.detail.endswith(f"; try: gst-launch-1.0 {check.facts['pipeline']}")


def test_an_rtsp_camera_that_decodes_in_software_here_gets_no_pipeline_to_try():
    (check,) = camera_checks([stream("dock", "rtsp://127.0.0.1:9/s")])
    assert check.status is Status.FAIL
    assert "pipeline" not in check.facts
