"""The pipelines edgebox writes for the Orin's decoder and CSI cameras: the
text itself, pinned, and the same shape run in real GStreamer against the
RTSP test camera with stand-in elements (``openh264dec`` for NVDEC,
``videoconvert`` for the VIC), so quoting, credentials, transport and the
BGR tail are proven where there is no Orin."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from rtsp_camera import SYSTEM_PYTHON, RtspTestCamera, rtsp_server_installed

from edgebox.secrets_mask import mask_secrets
from edgebox.streams.gst_pipelines import Elements, csi_pipeline, quote, rtsp_pipeline

FIRST_FRAME = Path(__file__).resolve().parent.parent / "gst_first_frame.py"
STAND_INS = Elements(decoder="openh264dec", converter="videoconvert")
"""Debian's software H.264 decoder and CPU converter in NVDEC's and the
VIC's places: every other element is the one the Orin runs."""
TRICKY_PASSWORD = 'p@ss "w"! \\x'
"""An @, quotes, a !, a space and a backslash: each ends a naive pipeline's
property early, or its element."""
BGR_TAIL = (
    "video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR ! "
    "appsink drop=true max-buffers=1 sync=false"
)


def test_an_rtsp_camera_gets_rtspsrc_parsebin_nvdec_and_a_bgr_appsink():
    assert rtsp_pipeline("rtsp://10.0.0.2:554/stream1") == (
        'rtspsrc location="rtsp://10.0.0.2:554/stream1" protocols=tcp latency=0 '
        "drop-on-latency=true ! parsebin ! nvv4l2decoder enable-max-performance=true ! "
        f"nvvidconv ! {BGR_TAIL}"
    )


def test_credentials_leave_the_url_for_rtspsrc_properties_decoded_and_quoted():
    url = f"rtsp://ad%20min:{urllib.parse.quote(TRICKY_PASSWORD, safe='')}@cam.local/live?ch=1"
    pipeline = rtsp_pipeline(url)
    assert pipeline.startswith(
        'rtspsrc location="rtsp://cam.local/live?ch=1" user-id="ad min" '
        'user-pw="p@ss \\"w\\"! \\\\x" protocols=tcp'
    )
    assert "p@ss" not in mask_secrets(pipeline)


def test_an_ipv6_camera_keeps_its_brackets_and_port():
    assert rtsp_pipeline("rtsp://u:p@[fe80::1]:8554/s").startswith(
        'rtspsrc location="rtsp://[fe80::1]:8554/s" user-id="u" user-pw="p"'
    )


def test_udp_gives_the_jitterbuffer_time_to_reorder():
    assert "protocols=udp latency=100 drop-on-latency=true" in rtsp_pipeline("rtsp://c/s", "udp")


def test_a_transport_other_than_tcp_or_udp_is_refused():
    with pytest.raises(ValueError, match="transport must be tcp or udp, got 'http'"):
        rtsp_pipeline("rtsp://c/s", "http")


def test_quote_escapes_backslashes_before_quotes():
    assert quote('a"b\\') == '"a\\"b\\\\"'


def test_a_csi_camera_stays_in_nvmm_until_nvvidconv():
    assert csi_pipeline(0, 1280, 720, 30) == (
        "nvarguscamerasrc sensor-id=0 ! "
        "video/x-raw(memory:NVMM),width=1280,height=720,framerate=30/1,format=NV12 ! "
        f"nvvidconv ! {BGR_TAIL}"
    )


def test_a_csi_camera_with_a_mode_and_a_flip():
    assert csi_pipeline(2, 1920, 1080, 60, flip=2, mode=1) == (
        "nvarguscamerasrc sensor-id=2 sensor-mode=1 ! "
        "video/x-raw(memory:NVMM),width=1920,height=1080,framerate=60/1,format=NV12 ! "
        f"nvvidconv flip-method=2 ! {BGR_TAIL}"
    )


@pytest.fixture
def camera(tmp_path):
    if not rtsp_server_installed():
        pytest.fail("GStreamer's RTSP server is not installed: run `make test`")
    with RtspTestCamera(tmp_path / "camera", user="cam", password=TRICKY_PASSWORD) as camera:
        yield camera


def first_frame(pipeline: str) -> dict:
    done = subprocess.run(
        [SYSTEM_PYTHON, str(FIRST_FRAME), "--timeout", "15", pipeline],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def camera_url(camera: RtspTestCamera, password: str) -> str:
    return f"rtsp://cam:{urllib.parse.quote(password, safe='')}@127.0.0.1:{camera.port}/cam"


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_the_generated_rtsp_pipeline_delivers_bgr_frames_in_real_gstreamer(camera, transport):
    pipeline = rtsp_pipeline(camera_url(camera, TRICKY_PASSWORD), transport, STAND_INS)
    assert first_frame(pipeline) == {
        "width": camera.width,
        "height": camera.height,
        "format": "BGR",
        "bytes": camera.width * camera.height * 3,
    }


def test_the_generated_rtsp_pipeline_with_a_wrong_password_is_refused(camera):
    pipeline = rtsp_pipeline(camera_url(camera, "wrong"), "tcp", STAND_INS)
    assert first_frame(pipeline) == {"error": "Unauthorized"}
