"""A stream's latest frame as a JPEG with its lanes, encoded at most a few
times a second per stream however often pages ask."""

from __future__ import annotations

import cv2
import numpy as np

from edgebox.dashboard.frame_jpeg import FrameEncoder, encode_frame
from edgebox.events import StreamLatency, StreamResult
from edgebox.streams.latest_frames import LatestFrame, LatestFrames


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def result(index: int, lanes: list, width: int = 200, height: int = 100) -> StreamResult:
    return StreamResult(
        "cam", "m", "1", index, 0.0, width, height, StreamLatency(0, 0, 0, 0), {"lanes": lanes}
    )


def decode(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def test_lanes_are_drawn_on_a_copy_of_the_frame():
    frame = np.zeros((100, 200, 3), np.uint8)
    lane = {"score": 0.9, "points": [[100.0, 0.0], [100.0, 99.0]]}
    image = decode(encode_frame(LatestFrame(frame, result(0, [lane]))))
    assert image.shape == (100, 200, 3)
    assert image[50, 100].max() > 100
    assert image[50, 20].max() < 40
    assert frame.max() == 0, "the stream's frame was written"


def test_wide_frames_are_scaled_down_with_their_lanes():
    frame = np.zeros((1080, 1920, 3), np.uint8)
    lane = {"score": 0.9, "points": [[1900.0, 0.0], [1900.0, 1079.0]]}
    image = decode(encode_frame(LatestFrame(frame, result(0, [lane], 1920, 1080))))
    assert image.shape == (540, 960, 3)
    assert image[270, 950].max() > 100


def test_a_frame_is_encoded_once_and_new_ones_at_most_max_per_s():
    frames = LatestFrames()
    clock = Clock()
    encoder = FrameEncoder(frames, max_per_s=5, clock=clock)
    assert encoder.jpeg("cam") is None
    frames.put(np.zeros((10, 20, 3), np.uint8), result(1, []))
    first = encoder.jpeg("cam")
    assert encoder.jpeg("cam") is first  # same frame: the same bytes
    frames.put(np.full((10, 20, 3), 255, np.uint8), result(2, []))
    clock.now += 0.1
    assert encoder.jpeg("cam") is first  # a newer frame, but within 1/5 s
    clock.now = 100.25
    newer = encoder.jpeg("cam")
    assert decode(newer).mean() > 200
