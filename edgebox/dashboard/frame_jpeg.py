"""A stream's latest frame as a JPEG with the result's lanes drawn, encoded on
the dashboard's request thread (never a stream's), at most ``max_per_s``
times a second per stream however often pages ask."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from edgebox.streams.latest_frames import LatestFrame, LatestFrames

MAX_PER_S = 5.0
MAX_WIDTH = 960
JPEG_QUALITY = 80
LANE_COLOURS_BGR = ((0, 220, 255), (80, 255, 80), (255, 160, 0), (255, 80, 255), (80, 80, 255))


class _Encoded(NamedTuple):
    frame_index: int
    encoded_at: float
    data: bytes


class FrameEncoder:
    """Called from the request threads; a lock per stream, so two requests
    for one stream encode once."""

    def __init__(
        self,
        frames: LatestFrames | None,
        max_per_s: float = MAX_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._frames = frames
        self._min_interval_s = 1.0 / max_per_s
        self._clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._cache: dict[str, _Encoded] = {}

    def jpeg(self, stream: str) -> bytes | None:
        """The JPEG of ``stream``'s latest frame; None before its first result."""
        latest = self._frames.get(stream) if self._frames is not None else None
        if latest is None:
            return None
        with self._lock(stream):
            cached = self._cache.get(stream)
            now = self._clock()
            if cached is not None and (
                cached.frame_index == latest.result.frame_index
                or now - cached.encoded_at < self._min_interval_s
            ):
                return cached.data
            data = encode_frame(latest)
            self._cache[stream] = _Encoded(latest.result.frame_index, now, data)
            return data

    def _lock(self, stream: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(stream, threading.Lock())


def encode_frame(latest: LatestFrame, max_width: int = MAX_WIDTH) -> bytes:
    """The frame (scaled down to ``max_width``) with each lane of
    ``outputs["lanes"]`` drawn as a polyline, as JPEG bytes. The frame itself
    is never written."""
    import cv2

    image = latest.image
    height, width = image.shape[:2]
    scale = min(1.0, max_width / width) if width else 1.0
    if scale < 1.0:
        image = cv2.resize(
            image, (round(width * scale), round(height * scale)), interpolation=cv2.INTER_AREA
        )
    else:
        image = image.copy()
    lanes = latest.result.outputs.get("lanes")
    if isinstance(lanes, list):
        thickness = max(2, round(image.shape[1] / 320))
        for index, lane in enumerate(lanes):
            points = lane.get("points") if isinstance(lane, dict) else None
            if not points or len(points) < 2:
                continue
            polyline = np.round(np.asarray(points, dtype=np.float64) * scale).astype(np.int32)
            colour = LANE_COLOURS_BGR[index % len(LANE_COLOURS_BGR)]
            curve = [polyline.reshape(-1, 1, 2)]
            cv2.polylines(image, curve, False, colour, thickness, cv2.LINE_AA)
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise RuntimeError(f"stream '{latest.result.stream}': OpenCV could not encode a JPEG")
    return encoded.tobytes()
