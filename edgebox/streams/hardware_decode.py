"""Whether this machine can run the generated hardware pipelines
(``gst_pipelines``), and so how a stream's source is opened.

Two things must hold: OpenCV was built with GStreamer (JetPack's
``python3-opencv`` is, PyPI's wheel is not), and GStreamer has the elements
the pipeline names (``nvv4l2decoder`` and ``nvvidconv`` come with L4T's
multimedia packages). Elements are looked up the way GStreamer itself
would, through its registry (``gst-inspect-1.0 --exists``, or ``python3-gi``
when the tools are not installed), never by guessing at plugin paths.
Answers are kept for the daemon's life: plugins do not appear under a
running process.
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from edgebox.secrets_mask import MaskSecrets
from edgebox.streams.gst_pipelines import CSI_ELEMENTS, RTSP_ELEMENTS
from edgebox.streams.source_spec import Decode, SourceKind, SourceSpec

log = logging.getLogger(__name__)
log.addFilter(MaskSecrets())

INSPECT_TIMEOUT_S = 10.0
"""A first ``gst-inspect-1.0`` may rebuild GStreamer's plugin registry."""

PACKAGE_OF = {
    "nvv4l2decoder": "nvidia-l4t-gstreamer",
    "nvvidconv": "nvidia-l4t-gstreamer",
    "nvarguscamerasrc": "nvidia-l4t-gstreamer",
    "rtspsrc": "gstreamer1.0-plugins-good",
    "parsebin": "gstreamer1.0-plugins-base",
    "videoconvert": "gstreamer1.0-plugins-base",
    "appsink": "gstreamer1.0-plugins-base",
}
"""Where a missing element comes from, for the reason shown: L4T's own
packages for NVIDIA's elements, Ubuntu's for the rest."""

ElementExists = Callable[[str], "bool | None"]
"""Whether GStreamer has an element; None when there is no way to ask."""


@dataclass(frozen=True)
class Support:
    available: bool
    reason: str = ""
    """Why not, in words for the log and the stream's status."""


class GstProbe:
    """What this machine's OpenCV and GStreamer can run; each question is
    asked once (a ``gst-inspect-1.0`` per element, at a stream's first open)."""

    def __init__(
        self,
        opencv_has_gstreamer: Callable[[], bool],
        element_exists: ElementExists,
    ) -> None:
        self._opencv_has_gstreamer = functools.cache(opencv_has_gstreamer)
        self._element_exists = functools.cache(element_exists)
        self._lock = threading.Lock()
        self._software_only: set[str] = set()

    def hardware_failed(self, source: str) -> None:
        """``source``'s hardware pipeline did not start where FFmpeg did (a
        codec NVDEC or parsebin does not take, say): ``auto`` decodes it in
        software from now on instead of trying the pipeline at every
        reconnect."""
        with self._lock:
            self._software_only.add(source)

    def software_only(self, source: str) -> bool:
        with self._lock:
            return source in self._software_only

    def support(self, elements: Iterable[str]) -> Support:
        with self._lock:
            if not self._opencv_has_gstreamer():
                return Support(
                    False,
                    "this OpenCV has no GStreamer (PyPI's wheel); the Orin's decoder needs "
                    "JetPack's python3-opencv",
                )
            missing, unknown = [], []
            for name in elements:
                exists = self._element_exists(name)
                if exists is None:
                    unknown.append(name)
                elif not exists:
                    missing.append(name)
        if unknown:
            return Support(
                False,
                f"cannot ask GStreamer for {', '.join(unknown)}: neither gst-inspect-1.0 "
                "(gstreamer1.0-tools) nor python3-gi is installed",
            )
        if missing:
            packages = sorted({PACKAGE_OF.get(name, "its GStreamer plugin") for name in missing})
            return Support(
                False, f"GStreamer has no {', '.join(missing)} (install {', '.join(packages)})"
            )
        return Support(True)


@dataclass(frozen=True)
class Choice:
    """How a source opens: through a generated pipeline, or as it is."""

    pipeline: bool
    decoder: str
    """Who turns the source into frames, for the self-test and the log."""
    refusal: str = ""
    """Set when the stream asked for hardware and cannot have it."""
    fallback: str = ""
    """Set when ``auto`` fell back to software: the reason, said once."""


SOFTWARE_DECODER = "OpenCV's FFmpeg, in software"
HARDWARE_DECODER = "the Orin's decoder (nvv4l2decoder)"
ISP = "the Orin's ISP (nvarguscamerasrc)"
DECODED_AS_IS = {
    SourceKind.SYNTHETIC: "synthetic frames",
    SourceKind.DEVICE: "V4L2 through OpenCV",
    SourceKind.FILE: SOFTWARE_DECODER,
    SourceKind.NETWORK: SOFTWARE_DECODER,
    SourceKind.GSTREAMER: "the configured GStreamer pipeline",
    SourceKind.CSI: ISP,
}
"""Who makes a source's frames when no pipeline is generated for it."""


def choose(spec: SourceSpec, probe: GstProbe) -> Choice:
    """The way ``spec`` opens on this machine, by its ``decode`` setting."""
    if spec.kind is SourceKind.CSI:
        support = probe.support(CSI_ELEMENTS)
        return Choice(True, ISP, refusal=_refusal("a CSI camera", support))
    if not spec.hardware_decodable or spec.decode is Decode.SOFTWARE:
        return Choice(False, DECODED_AS_IS[spec.kind])
    if spec.decode is Decode.AUTO and probe.software_only(spec.text):
        return Choice(False, SOFTWARE_DECODER)
    support = probe.support(RTSP_ELEMENTS)
    if support.available:
        return Choice(True, HARDWARE_DECODER)
    if spec.decode is Decode.HARDWARE:
        return Choice(True, HARDWARE_DECODER, refusal=_refusal("decode: hardware", support))
    return Choice(False, SOFTWARE_DECODER, fallback=support.reason)


def _refusal(what: str, support: Support) -> str:
    return "" if support.available else f"{what} cannot run here: {support.reason}"


def gst_inspect_exists(name: str) -> bool | None:
    """Ask GStreamer's registry through ``gst-inspect-1.0``; None without it."""
    tool = shutil.which("gst-inspect-1.0")
    if tool is None:
        return _gi_exists(name)
    try:
        done = subprocess.run(
            [tool, "--exists", name],
            capture_output=True,
            timeout=INSPECT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return _gi_exists(name)
    return done.returncode == 0


def _gi_exists(name: str) -> bool | None:
    try:
        import gi

        gi.require_version("Gst", "1.0")
        from gi.repository import Gst
    except (ImportError, ValueError):
        return None
    if not Gst.is_initialized():
        Gst.init(None)
    return Gst.ElementFactory.find(name) is not None


def opencv_has_gstreamer() -> bool:
    """False without OpenCV."""
    try:
        import cv2
    except ImportError:
        return False
    return build_has_gstreamer(cv2)


def build_has_gstreamer(cv2: Any) -> bool:
    """From OpenCV's own build summary (``cv2.getBuildInformation()``)."""
    for line in cv2.getBuildInformation().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "GStreamer":
            return value.strip().upper().startswith("YES")
    return False


_default: GstProbe | None = None
_default_lock = threading.Lock()


def default_probe() -> GstProbe:
    global _default
    with _default_lock:
        if _default is None:
            _default = GstProbe(opencv_has_gstreamer, gst_inspect_exists)
        return _default


class FallbackNotice:
    """``auto``'s fall back to software is said once per reason, not per
    camera or at every reconnect: it is a fact about the machine."""

    def __init__(self) -> None:
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def say(self, spec: SourceSpec, reason: str) -> bool:
        with self._lock:
            if reason in self._said:
                return False
            self._said.add(reason)
        log.warning(
            "decode auto: RTSP cameras decode in software on this machine ('%s' first): %s; "
            "set decode: software to silence this, or hardware to insist",
            spec.display,
            reason,
        )
        return True


FALLBACK_NOTICE = FallbackNotice()
