"""V4L2 cameras, video files, network streams and GStreamer pipelines, all
through OpenCV's ``VideoCapture``.

On the Orin, CSI cameras need JetPack's OpenCV (``python3-opencv``), which is
built with GStreamer; the PyPI wheel is not. Live sources keep one buffered
frame (``CAP_PROP_BUFFERSIZE``) and network streams ask FFmpeg for low-delay
reading, so a frame is never older than the one before it plus decode time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from edgebox.streams.frame_source import SourceError
from edgebox.streams.source_spec import SourceKind, SourceSpec

FFMPEG_OPTIONS_VARIABLE = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
LOW_LATENCY_FFMPEG_OPTIONS = "rtsp_transport;tcp|fflags;nobuffer|flags;low_delay"
"""TCP survives lossy Wi-Fi without smeared frames; ``nobuffer`` and
``low_delay`` stop FFmpeg holding frames back to smooth playback."""
NETWORK_OPEN_TIMEOUT_MS = 10_000
NETWORK_READ_TIMEOUT_MS = 5_000
"""A camera that stops sending fails the read after this long instead of
blocking the capture thread (and shutdown) for FFmpeg's default 30 s."""

_setup_lock = threading.Lock()
_quieted = False


def prefer_low_latency_network_reads() -> None:
    """Set FFmpeg's capture options for network streams unless the operator
    set ``OPENCV_FFMPEG_CAPTURE_OPTIONS`` already. OpenCV reads the variable
    when a capture opens, so this runs once, before any capture thread starts."""
    os.environ.setdefault(FFMPEG_OPTIONS_VARIABLE, LOW_LATENCY_FFMPEG_OPTIONS)


class OpenCvSource:
    """A ``cv2.VideoCapture`` behind the FrameSource interface."""

    def __init__(self, spec: SourceSpec) -> None:
        self._cv2 = _import_cv2()
        self._capture: Any = _open(self._cv2, spec)

    def grab(self) -> bool:
        try:
            return bool(self._capture.grab())
        except self._cv2.error:
            return False

    def retrieve(self) -> np.ndarray | None:
        try:
            ok, frame = self._capture.retrieve()
        except self._cv2.error:
            return None
        if not ok or frame is None:
            return None
        if frame.ndim == 2:
            return self._cv2.cvtColor(frame, self._cv2.COLOR_GRAY2BGR)
        if frame.ndim == 3 and frame.shape[2] == 4:
            return self._cv2.cvtColor(frame, self._cv2.COLOR_BGRA2BGR)
        return frame

    def close(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.release()


def _import_cv2() -> ModuleType:
    global _quieted
    try:
        import cv2
    except ImportError as exc:
        raise SourceError(
            f"OpenCV (cv2) is not installed ({exc}); install python3-opencv on the Orin, "
            "or the 'cpu' extra elsewhere"
        ) from None
    with _setup_lock:
        if not _quieted and "OPENCV_LOG_LEVEL" not in os.environ:
            # OpenCV warns on stderr at every failed open; the stream's status
            # and the log already say why, once per change.
            cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
        _quieted = True
    return cv2


def _open(cv2: ModuleType, spec: SourceSpec) -> Any:
    if spec.kind is SourceKind.DEVICE:
        capture = _open_device(cv2, spec)
    elif spec.kind is SourceKind.FILE:
        capture = _open_file(cv2, spec)
    elif spec.kind is SourceKind.NETWORK:
        capture = _open_network(cv2, spec)
    elif spec.kind is SourceKind.GSTREAMER:
        capture = _open_gstreamer(cv2, spec)
    else:
        raise SourceError(f"'{spec.display}' is not an OpenCV source")
    if spec.live:
        capture.set(cv2.CAP_PROP_BUFFERSIZE, 1)
    return capture


def _open_device(cv2: ModuleType, spec: SourceSpec) -> Any:
    target = spec.target
    path = Path(f"/dev/video{target}" if isinstance(target, int) else target)
    if not path.exists():
        raise SourceError(
            f"no such device '{path}' (is the camera plugged in? `v4l2-ctl --list-devices` "
            "lists the cameras)"
        )
    if not os.access(path, os.R_OK | os.W_OK):
        raise SourceError(
            f"permission denied on '{path}' (add the user edgebox runs as to the 'video' group)"
        )
    capture = cv2.VideoCapture(target, cv2.CAP_V4L2)
    if not capture.isOpened():
        capture.release()
        raise SourceError(
            f"cannot open V4L2 device '{path}' (busy in another program, or not a capture device)"
        )
    return capture


def _open_file(cv2: ModuleType, spec: SourceSpec) -> Any:
    path = Path(str(spec.target))
    if not path.is_file():
        raise SourceError(f"no such video file '{path}'")
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        capture.release()
        raise SourceError(f"cannot read video file '{path}' (no OpenCV reader for its format)")
    return capture


def _open_network(cv2: ModuleType, spec: SourceSpec) -> Any:
    params = [
        cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
        NETWORK_OPEN_TIMEOUT_MS,
        cv2.CAP_PROP_READ_TIMEOUT_MSEC,
        NETWORK_READ_TIMEOUT_MS,
    ]
    capture = cv2.VideoCapture(str(spec.target), cv2.CAP_FFMPEG, params)
    if not capture.isOpened():
        capture.release()
        raise SourceError(
            f"cannot open network stream '{spec.display}' (unreachable, wrong path or "
            f"credentials, or no answer within {NETWORK_OPEN_TIMEOUT_MS / 1000:g} s)"
        )
    return capture


def _open_gstreamer(cv2: ModuleType, spec: SourceSpec) -> Any:
    if not _has_gstreamer(cv2):
        raise SourceError(
            "this OpenCV build has no GStreamer support (see cv2.getBuildInformation()); "
            "on the Orin use JetPack's python3-opencv, not the PyPI wheel"
        )
    capture = cv2.VideoCapture(str(spec.target), cv2.CAP_GSTREAMER)
    if not capture.isOpened():
        capture.release()
        raise SourceError(
            "GStreamer pipeline did not start (try it with gst-launch-1.0, appsink replaced "
            "by fakesink, to see the element that fails)"
        )
    return capture


def _has_gstreamer(cv2: ModuleType) -> bool:
    for line in cv2.getBuildInformation().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "GStreamer":
            return value.strip().upper().startswith("YES")
    return False
