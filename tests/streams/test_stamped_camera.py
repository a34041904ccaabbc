"""The RTSP test camera's ``--stamp`` frames carry the moment they were made,
readable after H.264 and FFmpeg's decode: what bench/cameras.py's glass-to-
result figure rests on."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
from rtsp_camera import RtspTestCamera, rtsp_server_installed

BITS, BLOCK = 42, 15


def stamp_of(frame: np.ndarray) -> int:
    row = frame[8, BLOCK // 2 : BITS * BLOCK : BLOCK].astype(np.int32).mean(axis=1)
    stamp = 0
    for bit in row > 128:
        stamp = stamp * 2 + int(bit)
    return stamp


def test_each_stamped_frame_carries_the_wall_clock_of_its_making(tmp_path):
    if not rtsp_server_installed():
        pytest.fail("GStreamer's RTSP server is not installed: run `make test`")
    started_ms = time.time() * 1000
    with RtspTestCamera(tmp_path / "camera", stamp=True, fps=15) as camera:
        capture = cv2.VideoCapture(camera.url(), cv2.CAP_FFMPEG)
        try:
            stamps = []
            for _ in range(10):
                ok, frame = capture.read()
                assert ok
                stamps.append((stamp_of(frame), time.time() * 1000))
        finally:
            capture.release()
    assert all(started_ms <= made <= read for made, read in stamps)
    made = [m for m, _ in stamps]
    assert made == sorted(made) and len(set(made)) == len(made)


def test_a_network_camera_decodes_on_one_thread_so_no_frame_is_held_back(tmp_path):
    """FFmpeg's frame threads each hold a frame: with OpenCV's default (one
    per core) a 15 fps camera's frames reached the stream two frames late
    here, and would be eleven late on an AGX Orin (bench/RESULTS.md)."""
    from edgebox.streams.opencv_source import OpenCvSource
    from edgebox.streams.source_spec import parse_source

    if not rtsp_server_installed():
        pytest.fail("GStreamer's RTSP server is not installed: run `make test`")
    with RtspTestCamera(tmp_path / "camera", stamp=True, fps=15) as camera:
        source = OpenCvSource(parse_source(camera.url(), "software"))
        try:
            assert source.grab() and source.retrieve() is not None
            assert source._capture.get(cv2.CAP_PROP_N_THREADS) == 1
        finally:
            source.close()
