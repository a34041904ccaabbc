"""V4L2 cameras, video files, network streams, CSI cameras and GStreamer
pipelines, all through OpenCV's ``VideoCapture``.

On the Orin, CSI cameras and hardware decode need JetPack's OpenCV
(``python3-opencv``), which is built with GStreamer; the PyPI wheel is not.
Which way a source opens is ``hardware_decode.choose``'s answer; the
pipelines themselves are ``gst_pipelines``'. Live sources keep one buffered
frame (``CAP_PROP_BUFFERSIZE``) and network streams ask FFmpeg for low-delay
reading, so a frame is never older than the one before it plus decode time.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from edgebox.secrets_mask import MaskSecrets
from edgebox.streams import gst_pipelines
from edgebox.streams.frame_source import SourceError
from edgebox.streams.hardware_decode import (
    FALLBACK_NOTICE,
    SOFTWARE_DECODER,
    GstProbe,
    build_has_gstreamer,
    choose,
    default_probe,
)
from edgebox.streams.source_spec import Decode, SourceKind, SourceSpec

log = logging.getLogger(__name__)
log.addFilter(MaskSecrets())

FFMPEG_OPTIONS_VARIABLE = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
LOW_LATENCY_FFMPEG_OPTIONS = "rtsp_transport;tcp|fflags;nobuffer|flags;low_delay"
"""TCP survives lossy Wi-Fi without smeared frames; ``nobuffer`` and
``low_delay`` stop FFmpeg holding frames back to smooth playback."""
NETWORK_OPEN_TIMEOUT_MS = 10_000
NETWORK_READ_TIMEOUT_MS = 5_000
"""A camera that stops sending fails the read after this long instead of
blocking the capture thread (and shutdown) for FFmpeg's default 30 s."""
NETWORK_DECODE_THREADS = 1
"""FFmpeg's H.264/H.265 decoders thread by frames, and each extra thread
holds one more frame back: OpenCV asks for one thread per core, so a camera
at 15 fps reached results 2 frames late on 2 cores and would be 11 late
(730 ms) on an AGX Orin's 12 (bench/RESULTS.md, issue 26). One thread
decodes a camera's frames as they come; where that is too slow for the
stream, the Orin's hardware decoder is the answer, not more threads."""
GSTREAMER_TIMEOUTS_SINCE = (4, 7)
"""OpenCV 4.7 gave its GStreamer backend the open and read timeouts (JetPack 6
ships 4.8); older builds refuse a capture given parameters they do not know."""

_setup_lock = threading.Lock()
_quieted = False


def prefer_low_latency_network_reads() -> None:
    """Set FFmpeg's capture options for network streams unless the operator
    set ``OPENCV_FFMPEG_CAPTURE_OPTIONS`` already. OpenCV reads the variable
    when a capture opens, so this runs once, before any capture thread starts."""
    os.environ.setdefault(FFMPEG_OPTIONS_VARIABLE, LOW_LATENCY_FFMPEG_OPTIONS)


def rtsp_transport() -> str:
    """The transport FFmpeg is told to use (``rtsp_transport`` in
    ``OPENCV_FFMPEG_CAPTURE_OPTIONS``), so a hardware pipeline asks the camera
    for the same one: one setting for both decoders."""
    options = os.environ.get(FFMPEG_OPTIONS_VARIABLE, LOW_LATENCY_FFMPEG_OPTIONS)
    for pair in options.split("|"):
        key, _, value = pair.partition(";")
        if key.strip() == "rtsp_transport" and value.strip() in ("tcp", "udp"):
            return value.strip()
    return "tcp"


class OpenCvSource:
    """A ``cv2.VideoCapture`` behind the FrameSource interface."""

    def __init__(self, spec: SourceSpec, probe: GstProbe | None = None) -> None:
        self._cv2 = _import_cv2()
        probe = probe or default_probe()
        choice = choose(spec, probe)
        if choice.refusal:
            raise SourceError(choice.refusal)
        if choice.fallback:
            FALLBACK_NOTICE.say(spec, choice.fallback)
        self.decoder = choice.decoder
        """Who turns the source into frames (the self-test reports it)."""
        if not choice.pipeline:
            self._capture: Any = _open(self._cv2, spec)
            return
        try:
            self._capture = _open_generated(self._cv2, spec, generated_pipeline(spec))
        except SourceError as hardware:
            if spec.kind is not SourceKind.NETWORK or spec.decode is not Decode.AUTO:
                raise
            self._capture = _open(self._cv2, spec)  # its own error if FFmpeg fails too
            probe.hardware_failed(spec.text)
            self.decoder = SOFTWARE_DECODER
            log.warning(
                "'%s': decode auto: the hardware pipeline did not start (%s) but FFmpeg "
                "did; this camera decodes in software from now on",
                spec.display,
                hardware,
            )

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
    threads = getattr(cv2, "CAP_PROP_N_THREADS", None)
    if threads is not None:
        params += [threads, NETWORK_DECODE_THREADS]
    capture = cv2.VideoCapture(str(spec.target), cv2.CAP_FFMPEG, params)
    if not capture.isOpened():
        capture.release()
        raise SourceError(
            f"cannot open network stream '{spec.display}' (unreachable, wrong path or "
            f"credentials, or no answer within {NETWORK_OPEN_TIMEOUT_MS / 1000:g} s)"
        )
    return capture


def generated_pipeline(spec: SourceSpec) -> str:
    """The pipeline edgebox writes for a CSI camera or a hardware-decoded
    RTSP camera."""
    if spec.kind is SourceKind.CSI:
        options = spec.options
        return gst_pipelines.csi_pipeline(
            int(spec.target),
            options["width"],
            options["height"],
            options["framerate"],
            options["flip"],
            options.get("mode"),
        )
    return gst_pipelines.rtsp_pipeline(str(spec.target), rtsp_transport())


def _open_generated(cv2: ModuleType, spec: SourceSpec, pipeline: str) -> Any:
    params: list[int] = []
    if _version(cv2) >= GSTREAMER_TIMEOUTS_SINCE:
        params = [
            cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
            NETWORK_OPEN_TIMEOUT_MS,
            cv2.CAP_PROP_READ_TIMEOUT_MSEC,
            NETWORK_READ_TIMEOUT_MS,
        ]
    capture = cv2.VideoCapture(pipeline, cv2.CAP_GSTREAMER, params)
    if not capture.isOpened():
        capture.release()
        what = "CSI camera" if spec.kind is SourceKind.CSI else "hardware-decode pipeline for"
        raise SourceError(
            f"{what} '{spec.display}' did not start (unreachable, wrong credentials, or an "
            "element failed; `edgebox selftest` shows the pipeline to try with gst-launch-1.0)"
        )
    capture.set(cv2.CAP_PROP_BUFFERSIZE, 1)
    return capture


def _version(cv2: ModuleType) -> tuple[int, int]:
    try:
        major, minor = str(cv2.__version__).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


def _open_gstreamer(cv2: ModuleType, spec: SourceSpec) -> Any:
    if not build_has_gstreamer(cv2):
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
