"""What a stream's ``source`` setting names, decided from its text alone so
settings can refuse a bad one at startup, before any camera is touched.

    0, "0", "/dev/video0"                  V4L2 device (index or path)
    rtsp://... rtsps://... http(s)://...   network stream (FFmpeg, or the Orin's decoder)
    csi:0?width=1920&height=1080           CSI camera through nvarguscamerasrc (the Orin's ISP)
    "nvarguscamerasrc ! ... ! appsink"     GStreamer pipeline (anything with '!')
    synthetic:road?seed=3&width=1280       the synthetic road (edgebox.streams.synthetic_road)
    anything else                          a video file

A stream's ``decode`` setting travels in the spec too: whether a network
camera may, must or must not use the hardware decoder is known, like the
source, before anything opens.
"""

from __future__ import annotations

import dataclasses
import enum
import urllib.parse
from dataclasses import dataclass, field

from edgebox.secrets_mask import mask_secrets

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "http", "https")
SYNTHETIC_PREFIX = "synthetic:"
SYNTHETIC_SCENES = ("road",)
SYNTHETIC_OPTIONS = ("seed", "width", "height")
CSI_PREFIX = "csi:"
MAX_CSI_SENSOR = 15
"""nvarguscamerasrc's ``sensor-id``; an AGX Orin takes up to 16 virtual channels."""
CSI_DEFAULTS = {"width": 1280, "height": 720, "framerate": 30, "flip": 0}
"""What a bare ``csi:N`` asks the sensor for; ``mode`` is left to Argus."""
CSI_FLIP_METHODS = range(8)
"""nvvidconv's ``flip-method``: 0 none, 1 counter-clockwise 90, 2 180,
3 clockwise 90, 4 horizontal, 5 upper-right diagonal, 6 vertical, 7 upper-left
diagonal."""
HARDWARE_DECODE_SCHEMES = ("rtsp", "rtsps")
"""Where a hardware pipeline is generated (rtspsrc); other network schemes
decode in software."""


class SourceKind(enum.Enum):
    DEVICE = "device"
    FILE = "file"
    NETWORK = "network"
    GSTREAMER = "gstreamer"
    CSI = "csi"
    SYNTHETIC = "synthetic"


class Decode(enum.Enum):
    """A stream's ``decode`` setting (docs/streams.md, "Hardware decode")."""

    AUTO = "auto"
    """The Orin's decoder where OpenCV has GStreamer and the decoder is
    present; FFmpeg in software otherwise, said once in the log."""
    HARDWARE = "hardware"
    """The Orin's decoder or nothing: the stream reports why it cannot."""
    SOFTWARE = "software"
    """OpenCV's FFmpeg on the CPU, always."""


@dataclass(frozen=True)
class SourceSpec:
    kind: SourceKind
    target: str | int
    """Device index or path, file path, URL, pipeline, or the synthetic scene."""
    text: str
    """The source as configured, for messages."""
    options: dict[str, int] = field(default_factory=dict)
    """Synthetic sources: seed, width, height. CSI cameras: width, height,
    framerate, flip, and mode when given."""
    decode: Decode = Decode.AUTO

    @property
    def live(self) -> bool:
        """Frames arrive at the source's own pace and go stale if not taken:
        the capture loop must keep grabbing them and decode only the ones it
        keeps. Files and synthetic frames wait to be read, so they are paced."""
        return self.kind in (
            SourceKind.DEVICE,
            SourceKind.NETWORK,
            SourceKind.GSTREAMER,
            SourceKind.CSI,
        )

    @property
    def hardware_decodable(self) -> bool:
        """An RTSP camera: the kind of source a hardware pipeline is built for."""
        return (
            self.kind is SourceKind.NETWORK
            and urllib.parse.urlsplit(str(self.target)).scheme.lower() in HARDWARE_DECODE_SCHEMES
        )

    @property
    def display(self) -> str:
        """The source for logs, status and messages, credentials masked
        (``mask_secrets``): a URL's password, a pipeline's ``user-pw=``; both
        travel further than the config file (journal, MQTT, dashboard)."""
        return mask_secrets(self.text)


def parse_source(source: str | int, decode: str | Decode = Decode.AUTO) -> SourceSpec:
    """The spec for a configured source and its ``decode`` setting;
    ValueError says what is wrong."""
    spec = _parse(source)
    try:
        mode = Decode(decode)
    except ValueError:
        raise ValueError(
            f"decode must be one of {', '.join(d.value for d in Decode)}, got {decode!r}"
        ) from None
    if mode is Decode.AUTO:
        return spec
    if spec.kind is not SourceKind.NETWORK:
        raise ValueError(
            f"decode: {mode.value} applies to network cameras (rtsp://); "
            f"'{spec.display}' is a {_KIND_WORDS[spec.kind]}, read as it is"
        )
    if mode is Decode.HARDWARE and not spec.hardware_decodable:
        raise ValueError(
            f"decode: hardware is built for rtsp:// and rtsps:// cameras; '{spec.display}' "
            "decodes in software (decode: auto or software)"
        )
    return dataclasses.replace(spec, decode=mode)


_KIND_WORDS = {
    SourceKind.DEVICE: "V4L2 camera",
    SourceKind.FILE: "video file",
    SourceKind.GSTREAMER: "GStreamer pipeline",
    SourceKind.CSI: "CSI camera (its frames come from the ISP)",
    SourceKind.SYNTHETIC: "synthetic source",
}


def _parse(source: str | int) -> SourceSpec:
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
    if text.startswith(CSI_PREFIX):
        return _csi(text)
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
    options = _integer_options(text, query, SYNTHETIC_OPTIONS)
    for key in ("width", "height"):
        _at_least(text, key, options, 16)
    return SourceSpec(SourceKind.SYNTHETIC, scene, text, options)


def _csi(text: str) -> SourceSpec:
    sensor, _, query = text[len(CSI_PREFIX) :].partition("?")
    if not sensor.isdigit() or int(sensor) > MAX_CSI_SENSOR:
        raise ValueError(
            f"CSI camera '{text}' needs a sensor id 0..{MAX_CSI_SENSOR} after 'csi:' "
            "(e.g. csi:0?width=1920&height=1080&framerate=30)"
        )
    options = {**CSI_DEFAULTS, **_integer_options(text, query, (*CSI_DEFAULTS, "mode"))}
    for key in ("width", "height"):
        _at_least(text, key, options, 16)
    _at_least(text, "framerate", options, 1)
    _at_least(text, "mode", options, 0)
    if options["flip"] not in CSI_FLIP_METHODS:
        raise ValueError(
            f"option 'flip' in '{text}' must be nvvidconv's flip-method 0..7, got {options['flip']}"
        )
    return SourceSpec(SourceKind.CSI, int(sensor), text, options)


def _integer_options(text: str, query: str, known: tuple[str, ...]) -> dict[str, int]:
    options: dict[str, int] = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in known:
            raise ValueError(f"unknown option '{key}' in '{text}'; known: {', '.join(known)}")
        try:
            options[key] = int(value)
        except ValueError:
            raise ValueError(
                f"option '{key}' in '{text}' must be an integer, got '{value}'"
            ) from None
    return options


def _at_least(text: str, key: str, options: dict[str, int], least: int) -> None:
    if key in options and options[key] < least:
        raise ValueError(f"option '{key}' in '{text}' must be >= {least}, got {options[key]}")
