"""Opening sources with real OpenCV and the real synthetic road, and the
reasons a source that cannot open gives."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from stream_models import level_of, write_video

from edgebox.streams.frame_source import SourceError
from edgebox.streams.hardware_decode import build_has_gstreamer
from edgebox.streams.source_spec import parse_source
from edgebox.streams.sources import open_source
from edgebox.streams.synthetic_road import SyntheticRoad


def read_all(source) -> list[np.ndarray]:
    frames = []
    while source.grab():
        frames.append(source.retrieve())
    return frames


def test_video_file_gives_bgr_frames_then_ends(tmp_path):
    video = write_video(tmp_path / "three.avi", [20, 120, 220], width=80, height=60)
    source = open_source(parse_source(str(video)))
    try:
        frames = read_all(source)
    finally:
        source.close()
    assert [f.shape for f in frames] == [(60, 80, 3)] * 3
    assert all(f.dtype == np.uint8 for f in frames)
    assert [level_of(f) for f in frames] == [20, 120, 220]


def test_closing_twice_is_harmless(tmp_path):
    source = open_source(parse_source(str(write_video(tmp_path / "a.avi", [1]))))
    source.close()
    source.close()


def test_missing_file_says_so(tmp_path):
    with pytest.raises(SourceError) as info:
        open_source(parse_source(str(tmp_path / "nope.avi")))
    assert str(info.value) == f"no such video file '{tmp_path / 'nope.avi'}'"


def test_file_that_is_not_a_video_says_so(tmp_path):
    bogus = tmp_path / "notes.avi"
    bogus.write_text("not a video\n")
    with pytest.raises(SourceError) as info:
        open_source(parse_source(str(bogus)))
    assert str(info.value) == f"cannot read video file '{bogus}' (no OpenCV reader for its format)"


@pytest.mark.parametrize("source", ["/dev/video97", 97, "97"])
def test_missing_camera_says_so(source):
    with pytest.raises(SourceError) as info:
        open_source(parse_source(source))
    assert str(info.value) == (
        "no such device '/dev/video97' (is the camera plugged in? `v4l2-ctl --list-devices` "
        "lists the cameras)"
    )


def test_unreachable_rtsp_camera_says_so_without_its_password():
    with pytest.raises(SourceError) as info:
        open_source(parse_source("rtsp://viewer:secret@127.0.0.1:9/stream1"))
    assert str(info.value) == (
        "cannot open network stream 'rtsp://viewer:***@127.0.0.1:9/stream1' (unreachable, wrong "
        "path or credentials, or no answer within 10 s)"
    )


def test_gstreamer_pipeline_that_cannot_start_says_why():
    with pytest.raises(SourceError) as info:
        open_source(parse_source("nosuchelement ! appsink"))
    if build_has_gstreamer(cv2):
        assert str(info.value).startswith("GStreamer pipeline did not start")
    else:
        assert str(info.value) == (
            "this OpenCV build has no GStreamer support (see cv2.getBuildInformation()); "
            "on the Orin use JetPack's python3-opencv, not the PyPI wheel"
        )


def test_synthetic_road_source_renders_the_moving_road():
    source = open_source(parse_source("synthetic:road?seed=3&width=320&height=180"))
    frames = []
    for _ in range(3):
        assert source.grab()
        frames.append(source.retrieve())
    source.close()

    assert [f.shape for f in frames] == [(180, 320, 3)] * 3
    assert all(f.dtype == np.uint8 for f in frames)
    expected = SyntheticRoad(seed=3, width=320, height=180)
    for frame in frames:
        np.testing.assert_array_equal(frame, expected.next_frame().image)
    assert not np.array_equal(frames[0], frames[2]), "the road should move"


def test_synthetic_road_defaults_to_640_by_360():
    source = open_source(parse_source("synthetic:road"))
    assert source.grab()
    assert source.retrieve().shape == (360, 640, 3)
