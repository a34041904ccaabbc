"""What a source's text names, and the messages for texts that name nothing."""

from __future__ import annotations

import pytest

from edgebox.streams.source_spec import Decode, SourceKind, parse_source


@pytest.mark.parametrize(
    ("text", "kind", "target", "live"),
    [
        (0, SourceKind.DEVICE, 0, True),
        ("2", SourceKind.DEVICE, 2, True),
        ("/dev/video0", SourceKind.DEVICE, "/dev/video0", True),
        ("rtsp://10.0.0.2:554/stream1", SourceKind.NETWORK, "rtsp://10.0.0.2:554/stream1", True),
        ("https://cam.local/mjpeg", SourceKind.NETWORK, "https://cam.local/mjpeg", True),
        (
            "nvarguscamerasrc ! nvvidconv ! video/x-raw,format=BGRx ! appsink",
            SourceKind.GSTREAMER,
            "nvarguscamerasrc ! nvvidconv ! video/x-raw,format=BGRx ! appsink",
            True,
        ),
        ("recordings/drive.mp4", SourceKind.FILE, "recordings/drive.mp4", False),
        ("file:///srv/my%20drive.avi", SourceKind.FILE, "/srv/my drive.avi", False),
        ("synthetic:road", SourceKind.SYNTHETIC, "road", False),
    ],
)
def test_kinds(text, kind, target, live):
    spec = parse_source(text)
    assert (spec.kind, spec.target, spec.live) == (kind, target, live)


def test_a_csi_camera_takes_its_sensor_and_options_with_defaults():
    spec = parse_source("csi:1?width=1920&height=1080&mode=2")
    assert (spec.kind, spec.target, spec.live) == (SourceKind.CSI, 1, True)
    assert spec.options == {"width": 1920, "height": 1080, "framerate": 30, "flip": 0, "mode": 2}
    assert parse_source("csi:0").options == {
        "width": 1280,
        "height": 720,
        "framerate": 30,
        "flip": 0,
    }


def test_decode_travels_in_the_spec_for_rtsp_cameras():
    assert parse_source("rtsp://c/s").decode is Decode.AUTO
    assert parse_source("rtsps://c/s", "hardware").decode is Decode.HARDWARE
    assert parse_source("https://c/mjpeg", "software").decode is Decode.SOFTWARE
    assert parse_source("rtsp://c/s", "hardware").hardware_decodable
    assert not parse_source("https://c/mjpeg").hardware_decodable


def test_synthetic_options_are_integers():
    spec = parse_source("synthetic:road?seed=3&width=1280&height=720")
    assert spec.options == {"seed": 3, "width": 1280, "height": 720}


def test_url_password_is_masked_for_display():
    spec = parse_source("rtsp://admin:hunter2@10.0.0.2:554/live")
    assert spec.display == "rtsp://admin:***@10.0.0.2:554/live"
    assert spec.target == "rtsp://admin:hunter2@10.0.0.2:554/live"
    assert parse_source("rtsp://10.0.0.2/live").display == "rtsp://10.0.0.2/live"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        (-1, "device index must be >= 0, got -1"),
        (True, "expected a device index, path, URL or pipeline, got True"),
        (["/dev/video0"], "expected a device index, path, URL or pipeline, got ['/dev/video0']"),
        ("synthetic:sea", "unknown synthetic scene 'sea'; known: road"),
        (
            "synthetic:road?speed=3",
            "unknown option 'speed' in 'synthetic:road?speed=3'; known: seed, width, height",
        ),
        (
            "synthetic:road?seed=three",
            "option 'seed' in 'synthetic:road?seed=three' must be an integer, got 'three'",
        ),
        (
            "synthetic:road?width=8",
            "option 'width' in 'synthetic:road?width=8' must be >= 16, got 8",
        ),
        (
            "csi:x",
            "CSI camera 'csi:x' needs a sensor id 0..15 after 'csi:' (e.g. "
            "csi:0?width=1920&height=1080&framerate=30)",
        ),
        (
            "csi:0?fps=30",
            "unknown option 'fps' in 'csi:0?fps=30'; known: width, height, framerate, flip, mode",
        ),
        (
            "csi:0?flip=9",
            "option 'flip' in 'csi:0?flip=9' must be nvvidconv's flip-method 0..7, got 9",
        ),
        ("csi:0?framerate=0", "option 'framerate' in 'csi:0?framerate=0' must be >= 1, got 0"),
        ("csi:0?mode=-1", "option 'mode' in 'csi:0?mode=-1' must be >= 0, got -1"),
        ("csi:0?width=8", "option 'width' in 'csi:0?width=8' must be >= 16, got 8"),
        (
            "v4l2src ! videoconvert",
            "GStreamer pipeline 'v4l2src ! videoconvert' must end in an appsink (e.g. '... ! "
            "videoconvert ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1')",
        ),
    ],
)
def test_bad_sources_say_what_is_wrong(text, message):
    with pytest.raises(ValueError) as info:
        parse_source(text)
    assert str(info.value) == message
