"""How a stream's source opens on this machine: the Orin's decoder where
OpenCV has GStreamer and GStreamer has NVIDIA's elements, software with one
notice where ``auto`` cannot have it, a refusal with the reason where
``hardware`` cannot; CSI cameras always through the ISP's pipeline. The
machine is a FakeGstProbe's answers here; ``gst-inspect-1.0`` is real."""

from __future__ import annotations

import logging

import pytest

from edgebox.streams import opencv_source
from edgebox.streams.frame_source import SourceError
from edgebox.streams.hardware_decode import (
    HARDWARE_DECODER,
    ISP,
    SOFTWARE_DECODER,
    FallbackNotice,
    GstProbe,
    choose,
    gst_inspect_exists,
)
from edgebox.streams.source_spec import parse_source

ORIN_ELEMENTS = {
    "rtspsrc",
    "parsebin",
    "nvv4l2decoder",
    "nvvidconv",
    "videoconvert",
    "appsink",
    "nvarguscamerasrc",
}


class FakeGstProbe(GstProbe):
    """A machine described by what it has, counting the questions asked."""

    def __init__(self, opencv_gstreamer: bool = True, elements=ORIN_ELEMENTS, known=True):
        self.asked: list[str] = []

        def exists(name: str) -> bool | None:
            self.asked.append(name)
            return (name in elements) if known else None

        super().__init__(lambda: opencv_gstreamer, exists)


def test_auto_on_an_orin_builds_the_hardware_pipeline():
    choice = choose(parse_source("rtsp://cam/s"), FakeGstProbe())
    assert (choice.pipeline, choice.decoder, choice.refusal, choice.fallback) == (
        True,
        HARDWARE_DECODER,
        "",
        "",
    )


def test_auto_with_pypi_opencv_falls_back_to_software_and_says_why():
    choice = choose(parse_source("rtsp://cam/s"), FakeGstProbe(opencv_gstreamer=False))
    assert (choice.pipeline, choice.decoder, choice.refusal) == (False, SOFTWARE_DECODER, "")
    assert choice.fallback == (
        "this OpenCV has no GStreamer (PyPI's wheel); the Orin's decoder needs JetPack's "
        "python3-opencv"
    )


def test_auto_without_nvidias_elements_falls_back_naming_them():
    probe = FakeGstProbe(elements=ORIN_ELEMENTS - {"nvv4l2decoder", "nvvidconv"})
    choice = choose(parse_source("rtsp://cam/s"), probe)
    assert not choice.pipeline
    assert (
        choice.fallback
        == "GStreamer has no nvv4l2decoder, nvvidconv (install nvidia-l4t-gstreamer)"
    )
    probe = FakeGstProbe(elements=ORIN_ELEMENTS - {"rtspsrc", "nvvidconv"})
    assert choose(parse_source("rtsp://cam/s"), probe).fallback == (
        "GStreamer has no rtspsrc, nvvidconv (install gstreamer1.0-plugins-good, "
        "nvidia-l4t-gstreamer)"
    )


def test_hardware_refuses_with_the_reason_when_it_cannot_run():
    spec = parse_source("rtsp://cam/s", "hardware")
    choice = choose(spec, FakeGstProbe(known=False))
    assert choice.refusal == (
        "decode: hardware cannot run here: cannot ask GStreamer for rtspsrc, parsebin, "
        "nvv4l2decoder, nvvidconv, videoconvert, appsink: neither gst-inspect-1.0 "
        "(gstreamer1.0-tools) nor python3-gi is installed"
    )


def test_software_never_asks_gstreamer():
    probe = FakeGstProbe()
    choice = choose(parse_source("rtsp://cam/s", "software"), probe)
    assert (choice.pipeline, choice.decoder, probe.asked) == (False, SOFTWARE_DECODER, [])


@pytest.mark.parametrize(
    ("source", "decoder"),
    [
        ("https://cam/mjpeg", SOFTWARE_DECODER),
        ("clip.mp4", SOFTWARE_DECODER),
        ("/dev/video0", "V4L2 through OpenCV"),
        ("v4l2src ! videoconvert ! appsink", "the configured GStreamer pipeline"),
    ],
)
def test_sources_without_a_hardware_pipeline_open_as_they_are(source, decoder):
    probe = FakeGstProbe()
    choice = choose(parse_source(source), probe)
    assert (choice.pipeline, choice.decoder, probe.asked) == (False, decoder, [])


def test_a_csi_camera_always_takes_the_isp_pipeline_or_says_why_not():
    choice = choose(parse_source("csi:0"), FakeGstProbe())
    assert (choice.pipeline, choice.decoder, choice.refusal) == (True, ISP, "")
    refused = choose(
        parse_source("csi:0"), FakeGstProbe(elements=ORIN_ELEMENTS - {"nvarguscamerasrc"})
    )
    assert refused.refusal == (
        "a CSI camera cannot run here: GStreamer has no nvarguscamerasrc (install "
        "nvidia-l4t-gstreamer)"
    )


def test_each_element_is_asked_about_once_per_daemon():
    probe = FakeGstProbe()
    for _ in range(3):
        choose(parse_source("rtsp://cam/s"), probe)
    assert sorted(probe.asked) == sorted(set(probe.asked))


def test_the_fall_back_is_said_once_per_reason(caplog):
    notice = FallbackNotice()
    spec = parse_source("rtsp://viewer:hunter2@cam/s")
    with caplog.at_level(logging.WARNING, logger="edgebox.streams.hardware_decode"):
        said = [notice.say(spec, "no GStreamer") for _ in range(2)]
        said.append(notice.say(parse_source("rtsp://cam/other"), "no GStreamer"))
        said.append(notice.say(parse_source("rtsp://cam/other"), "no nvv4l2decoder"))
    assert said == [True, False, False, True]
    assert [r.getMessage() for r in caplog.records] == [
        "decode auto: RTSP cameras decode in software on this machine "
        "('rtsp://viewer:***@cam/s' first): no GStreamer; set decode: software to silence "
        "this, or hardware to insist",
        "decode auto: RTSP cameras decode in software on this machine ('rtsp://cam/other' "
        "first): no nvv4l2decoder; set decode: software to silence this, or hardware to insist",
    ]


def test_gst_inspect_answers_from_gstreamers_own_registry():
    assert gst_inspect_exists("videoconvert") is True
    assert gst_inspect_exists("nvv4l2decoder") is False


class FakeVideoCapture:
    """Records how OpenCV was asked to open, and opens unless its backend
    is one of ``refused``."""

    opened: list[tuple] = []
    refused: set[int] = set()

    def __init__(self, *args):
        FakeVideoCapture.opened.append(args)
        self.backend = args[1] if len(args) > 1 else None

    def isOpened(self):
        return self.backend not in FakeVideoCapture.refused

    def set(self, *args):
        return True

    def release(self):
        pass


@pytest.fixture
def fake_capture(monkeypatch):
    import cv2

    FakeVideoCapture.opened = []
    FakeVideoCapture.refused = set()
    monkeypatch.setattr(cv2, "VideoCapture", FakeVideoCapture)
    monkeypatch.delenv(opencv_source.FFMPEG_OPTIONS_VARIABLE, raising=False)
    return FakeVideoCapture


def test_an_orin_opens_an_rtsp_camera_through_the_generated_pipeline(fake_capture):
    import cv2

    source = opencv_source.OpenCvSource(parse_source("rtsp://u:p@cam/s"), FakeGstProbe())
    ((pipeline, backend, params),) = fake_capture.opened
    assert pipeline.startswith('rtspsrc location="rtsp://cam/s" user-id="u" user-pw="p" ')
    assert backend == cv2.CAP_GSTREAMER
    assert source.decoder == HARDWARE_DECODER
    if opencv_source._version(cv2) >= opencv_source.GSTREAMER_TIMEOUTS_SINCE:
        assert params == [
            cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
            10_000,
            cv2.CAP_PROP_READ_TIMEOUT_MSEC,
            5_000,
        ]


def test_the_pipeline_follows_ffmpegs_transport_setting(fake_capture, monkeypatch):
    monkeypatch.setenv(opencv_source.FFMPEG_OPTIONS_VARIABLE, "rtsp_transport;udp|fflags;nobuffer")
    opencv_source.OpenCvSource(parse_source("rtsp://cam/s"), FakeGstProbe())
    assert "protocols=udp" in fake_capture.opened[0][0]


def test_a_csi_camera_opens_through_its_pipeline(fake_capture):
    opencv_source.OpenCvSource(parse_source("csi:1?width=1920&height=1080&flip=2"), FakeGstProbe())
    assert fake_capture.opened[0][0].startswith(
        "nvarguscamerasrc sensor-id=1 ! video/x-raw(memory:NVMM),width=1920,height=1080,"
        "framerate=30/1,format=NV12 ! nvvidconv flip-method=2 ! "
    )


def test_hardware_that_cannot_run_is_a_source_error_with_the_reason(fake_capture):
    with pytest.raises(SourceError, match="decode: hardware cannot run here: this OpenCV"):
        opencv_source.OpenCvSource(
            parse_source("rtsp://cam/s", "hardware"), FakeGstProbe(opencv_gstreamer=False)
        )
    assert fake_capture.opened == []


def test_auto_decodes_in_software_for_good_when_the_pipeline_fails_where_ffmpeg_works(
    fake_capture, caplog
):
    import cv2

    fake_capture.refused = {cv2.CAP_GSTREAMER}
    probe = FakeGstProbe()
    spec = parse_source("rtsp://u:pw@cam/mjpeg")
    with caplog.at_level(logging.WARNING, logger="edgebox.streams.opencv_source"):
        first = opencv_source.OpenCvSource(spec, probe)
        again = opencv_source.OpenCvSource(spec, probe)
    assert [args[1] for args in fake_capture.opened] == [
        cv2.CAP_GSTREAMER,
        cv2.CAP_FFMPEG,
        cv2.CAP_FFMPEG,
    ]
    assert first.decoder == again.decoder == SOFTWARE_DECODER
    (warning,) = caplog.records
    assert warning.getMessage().startswith(
        "'rtsp://u:***@cam/mjpeg': decode auto: the hardware pipeline did not start ("
    )
    assert choose(parse_source("rtsp://other/s"), probe).pipeline, "only that camera"


def test_hardware_never_falls_back_and_a_camera_both_refuse_is_tried_again(fake_capture):
    import cv2

    fake_capture.refused = {cv2.CAP_GSTREAMER, cv2.CAP_FFMPEG}
    probe = FakeGstProbe()
    with pytest.raises(SourceError, match="hardware-decode pipeline for 'rtsp://cam/s'"):
        opencv_source.OpenCvSource(parse_source("rtsp://cam/s", "hardware"), probe)
    assert [args[1] for args in fake_capture.opened] == [cv2.CAP_GSTREAMER]
    with pytest.raises(SourceError, match="cannot open network stream 'rtsp://cam/s'"):
        opencv_source.OpenCvSource(parse_source("rtsp://cam/s"), probe)
    assert choose(parse_source("rtsp://cam/s"), probe).pipeline
