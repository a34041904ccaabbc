"""GStreamer pipelines for the Orin's own hardware: the NVDEC decoder behind
network cameras and the ISP behind CSI cameras, each ending in the BGR
frames OpenCV's ``CAP_GSTREAMER`` hands to a stream.

Users never write these by hand (a pipeline typed into a YAML file is where
most Jetson camera support threads start): a stream's ``source`` and
``decode`` settings are enough, and the text is generated here, as plain
strings, so tests can read them and run them with stand-in elements where
there is no Orin (``Elements``).

Values are quoted for ``gst_parse_launch``: a password holding a space, a
quote or a ``!`` stays one property value instead of ending the element.
Credentials leave the URL for rtspsrc's ``user-id``/``user-pw``, so they need
no percent-encoding and are masked like any other (``secrets_mask``).
Reference: NVIDIA's Jetson Linux "Accelerated GStreamer" guide.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

BGR_TAIL = (
    "video/x-raw,format=BGRx",
    "videoconvert",
    "video/x-raw,format=BGR",
    "appsink drop=true max-buffers=1 sync=false",
)
"""nvvidconv writes 4-byte pixels only; videoconvert drops the pad byte on
the CPU, the one copy the frame needs to become a numpy array. The appsink
keeps the newest frame and never waits for a clock, so a slow model sees
fresh frames rather than a backlog."""

UDP_JITTER_MS = 100
"""rtspsrc's jitterbuffer over UDP: enough to reorder packets on a LAN. Over
TCP packets arrive in order, so frames leave the moment they are whole."""


@dataclass(frozen=True)
class Elements:
    """The elements a generated pipeline names; the Orin's by default, others
    where tests run the same pipeline shape without one."""

    decoder: str = "nvv4l2decoder enable-max-performance=true"
    """NVDEC; ``enable-max-performance`` keeps its clocks up, which is what
    a camera wants from it (lower latency for a few hundred mW)."""
    converter: str = "nvvidconv"
    """The VIC: NVMM surfaces to CPU memory, scaling and flips on the way."""
    camera: str = "nvarguscamerasrc"
    camera_caps: str = "video/x-raw(memory:NVMM)"
    """What the ISP hands on: frames in NVMM memory, never copied to the CPU
    before nvvidconv."""


ORIN = Elements()

RTSP_ELEMENTS = ("rtspsrc", "parsebin", "nvv4l2decoder", "nvvidconv", "videoconvert", "appsink")
"""What a hardware RTSP pipeline needs installed; ``hardware_decode`` checks them."""
CSI_ELEMENTS = ("nvarguscamerasrc", "nvvidconv", "videoconvert", "appsink")


def quote(value: str) -> str:
    """``value`` as one ``gst_parse_launch`` property value."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def rtsp_pipeline(url: str, transport: str = "tcp", elements: Elements = ORIN) -> str:
    """An RTSP camera decoded by NVDEC. ``parsebin`` finds the depayloader
    and parser for whatever the camera sends (H.264 or H.265; the decoder
    takes both), so nobody has to know the codec; ``transport`` is rtspsrc's
    ``protocols`` (``tcp`` or ``udp``)."""
    if transport not in ("tcp", "udp"):
        raise ValueError(f"transport must be tcp or udp, got {transport!r}")
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    location = urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, parts.query, parts.fragment)
    )
    source = [f"rtspsrc location={quote(location)}"]
    if parts.username is not None:
        source.append(f"user-id={quote(urllib.parse.unquote(parts.username))}")
    if parts.password is not None:
        source.append(f"user-pw={quote(urllib.parse.unquote(parts.password))}")
    latency_ms = 0 if transport == "tcp" else UDP_JITTER_MS
    source.append(f"protocols={transport} latency={latency_ms} drop-on-latency=true")
    return " ! ".join(
        (" ".join(source), "parsebin", elements.decoder, elements.converter, *BGR_TAIL)
    )


def csi_pipeline(
    sensor_id: int,
    width: int,
    height: int,
    framerate: int,
    flip: int = 0,
    mode: int | None = None,
    elements: Elements = ORIN,
) -> str:
    """A CSI camera through Argus: the ISP debayers and denoises, nvvidconv
    flips (``flip`` is its ``flip-method``) on the way to CPU memory.
    ``mode`` pins the sensor mode; without it Argus picks the one that fits
    the size and rate."""
    camera = f"{elements.camera} sensor-id={sensor_id}"
    if mode is not None:
        camera += f" sensor-mode={mode}"
    caps = (
        f"{elements.camera_caps},width={width},height={height},framerate={framerate}/1,format=NV12"
    )
    converter = f"{elements.converter} flip-method={flip}" if flip else elements.converter
    return " ! ".join((camera, caps, converter, *BGR_TAIL))
