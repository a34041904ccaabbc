"""What a stream's ``source`` setting names, decided from its text alone so
settings can refuse a bad one at startup, before any camera is touched.

    0, "0", "/dev/video0"                  V4L2 device (index or path)
    rtsp://... rtsps://... http(s)://...   network stream (FFmpeg)
    "nvarguscamerasrc ! ... ! appsink"     GStreamer pipeline (anything with '!')
    synthetic:road?seed=3&width=1280       the synthetic road (edgebox.streams.synthetic_road)
    anything else                          a video file
"""

from __future__ import annotations

import enum
import urllib.parse
from dataclasses import dataclass, field

from edgebox.secrets_mask import mask_secrets

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "http", "https")
SYNTHETIC_PREFIX = "synthetic:"
SYNTHETIC_SCENES = ("road",)
SYNTHETIC_OPTIONS = ("seed", "width", "height")


class SourceKind(enum.Enum):
    DEVICE = "device"
    FILE = "file"
    NETWORK = "network"
    GSTREAMER = "gstreamer"
    SYNTHETIC = "synthetic"


@dataclass(frozen=True)
class SourceSpec:
    kind: SourceKind
    target: str | int
    """Device index or path, file path, URL, pipeline, or the synthetic scene."""
    text: str
    """The source as configured, for messages."""
    options: dict[str, int] = field(default_factory=dict)
    """Synthetic sources only: seed, width, height."""

    @property
    def live(self) -> bool:
        """Frames arrive at the source's own pace and go stale if not taken:
        the capture loop must keep grabbing them and decode only the ones it
        keeps. Files and synthetic frames wait to be read, so they are paced."""
        return self.kind in (SourceKind.DEVICE, SourceKind.NETWORK, SourceKind.GSTREAMER)

    @property
    def display(self) -> str:
        """The source for logs, status and messages, credentials masked
        (``mask_secrets``): a URL's password, a pipeline's ``user-pw=``; both
        travel further than the config file (journal, MQTT, dashboard)."""
        return mask_secrets(self.text)


def parse_source(source: str | int) -> SourceSpec:
    """The spec for a configured source; ValueError says what is wrong."""
    if isinstance(source, bool) or not isinstance(source, (str, int)):
        raise ValueError(
            f"expected a device index, path, URL or pipeline, got {mask_secrets(repr(source))}"
        )
    if isinstance(source, int):
        return _device_index(source, str(source))
    text = source.strip()
    if not text:
        raise ValueError("is empty")
    if text.isdigit():
        return _device_index(int(text), text)
    if text.startswith("/dev/"):
        return SourceSpec(SourceKind.DEVICE, text, text)
    scheme = urllib.parse.urlsplit(text).scheme.lower()
    if scheme in NETWORK_SCHEMES and "://" in text:
        return SourceSpec(SourceKind.NETWORK, text, text)
    if text.startswith(SYNTHETIC_PREFIX):
        return _synthetic(text)
    if "!" in text:
        if "appsink" not in text:
            raise ValueError(
                f"GStreamer pipeline '{mask_secrets(text)}' must end in an appsink (e.g. "
                "'... ! videoconvert ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1')"
            )
        return SourceSpec(SourceKind.GSTREAMER, text, text)
    if scheme == "file":
        return SourceSpec(SourceKind.FILE, urllib.parse.unquote(text[len("file://") :]), text)
    return SourceSpec(SourceKind.FILE, text, text)


def _device_index(index: int, text: str) -> SourceSpec:
    if index < 0:
        raise ValueError(f"device index must be >= 0, got {index}")
    return SourceSpec(SourceKind.DEVICE, index, text)


def _synthetic(text: str) -> SourceSpec:
    scene, _, query = text[len(SYNTHETIC_PREFIX) :].partition("?")
    if scene not in SYNTHETIC_SCENES:
        raise ValueError(f"unknown synthetic scene '{scene}'; known: {', '.join(SYNTHETIC_SCENES)}")
    options: dict[str, int] = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in SYNTHETIC_OPTIONS:
            raise ValueError(
                f"unknown option '{key}' in '{text}'; known: {', '.join(SYNTHETIC_OPTIONS)}"
            )
        try:
            number = int(value)
        except ValueError:
            raise ValueError(
                f"option '{key}' in '{text}' must be an integer, got '{value}'"
            ) from None
        if key != "seed" and number < 16:
            raise ValueError(f"option '{key}' in '{text}' must be >= 16, got {number}")
        options[key] = number
    return SourceSpec(SourceKind.SYNTHETIC, scene, text, options)
