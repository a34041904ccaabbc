"""The Orin's decoder and ISP for real: the generated pipelines with NVIDIA's
own elements, through JetPack's OpenCV, where they can run (an Orin with
``python3-opencv`` and L4T's GStreamer plugins). Skipped, with the reason,
elsewhere; every other machine runs the same pipeline shape with stand-in
elements in ``test_gst_pipelines.py``."""

from __future__ import annotations

import os

import pytest
from rtsp_camera import RtspTestCamera, rtsp_server_installed

from edgebox.streams.gst_pipelines import CSI_ELEMENTS, RTSP_ELEMENTS
from edgebox.streams.hardware_decode import HARDWARE_DECODER, ISP, default_probe
from edgebox.streams.opencv_source import OpenCvSource
from edgebox.streams.source_spec import parse_source

decoder = default_probe().support(RTSP_ELEMENTS)


@pytest.mark.skipif(not decoder.available, reason=f"no hardware decode here: {decoder.reason}")
def test_an_rtsp_camera_decodes_on_nvdec_into_bgr_frames(tmp_path):
    if not rtsp_server_installed():
        pytest.fail("GStreamer's RTSP server is not installed: run `make test`")
    with RtspTestCamera(tmp_path / "camera", user="cam", password="s3cret-pw") as camera:
        spec = parse_source(camera.url(), "hardware")
        source = OpenCvSource(spec)
        try:
            assert source.decoder == HARDWARE_DECODER
            frames = []
            for _ in range(10):
                assert source.grab()
                frames.append(source.retrieve())
        finally:
            source.close()
    assert {f.shape for f in frames} == {(camera.height, camera.width, 3)}


@pytest.mark.skipif(
    "EDGEBOX_TEST_CSI_SENSOR" not in os.environ,
    reason="set EDGEBOX_TEST_CSI_SENSOR to the sensor id of a connected CSI camera",
)
def test_a_csi_camera_gives_frames_of_the_size_asked():
    support = default_probe().support(CSI_ELEMENTS)
    assert support.available, support.reason
    sensor = os.environ["EDGEBOX_TEST_CSI_SENSOR"]
    source = OpenCvSource(parse_source(f"csi:{sensor}?width=1280&height=720&framerate=30"))
    try:
        assert source.decoder == ISP
        assert source.grab()
        frame = source.retrieve()
    finally:
        source.close()
    assert frame is not None and frame.shape == (720, 1280, 3)
