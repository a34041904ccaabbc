"""Credentials in a stream's source never leave the settings file: masked by
one function (edgebox/secrets_mask.py) in the source's display, in stream
reasons quoting it, in the log (tracebacks too), in events, in the MQTT
payloads routed from them, and on the dashboard's API and pages."""

from __future__ import annotations

import json
import logging
import time

import pytest
from dashboard.dashboard_client import dashboard_deps

from edgebox.backoff import Backoff
from edgebox.dashboard.app import create_app, state_of
from edgebox.dashboard.settings import DashboardSettings
from edgebox.events import StreamState, StreamStatus
from edgebox.mqtt.routing import Router
from edgebox.mqtt.topics import Topics
from edgebox.secrets_mask import MaskSecrets, mask_secrets
from edgebox.streams.frame_source import SourceError
from edgebox.streams.manager import StreamManager
from edgebox.streams.settings import StreamSettings
from edgebox.streams.source_spec import parse_source

SECRETS = ("hunter2", "s3cr3t", "camuser", "t0ken", "pr0xy")
PIPELINE = (
    "rtspsrc location=rtsp://admin:hunter2@10.0.0.2:554/live user-id=camuser user-pw=s3cr3t "
    "proxy-pw=pr0xy latency=0 ! rtph264depay ! avdec_h264 ! videoconvert ! "
    "video/x-raw,format=BGR ! appsink drop=true max-buffers=1"
)
SOUP = (
    'souphttpsrc location="http://cam.local/video.cgi?user=camuser&pwd=s3cr3t" '
    "extra-headers=\"headers, Authorization=(string)'Bearer t0ken'\" ! jpegdec ! appsink"
)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("rtsp://admin:hunter2@10.0.0.2:554/live", "rtsp://admin:***@10.0.0.2:554/live"),
        ("rtsps://t0ken@cam/live", "rtsps://***@cam/live"),
        ("rtsp://admin:hun@ter2@cam/live", "rtsp://admin:***@cam/live"),
        ("rtsp://10.0.0.2:554/live", "rtsp://10.0.0.2:554/live"),
        (
            "rtspsrc location=rtsp://a:hunter2@cam user-id=camuser user-pw=s3cr3t ! appsink",
            "rtspsrc location=rtsp://a:***@cam user-id=*** user-pw=*** ! appsink",
        ),
        ('rtspsrc user-pw="s3 cr3t" ! appsink', "rtspsrc user-pw=*** ! appsink"),
        ("src password='s3cr3t' passwd=s3cr3t ! appsink", "src password=*** passwd=*** ! appsink"),
        ("srtsrc uri=srt://cam:9000 passphrase=s3cr3t", "srtsrc uri=srt://cam:9000 passphrase=***"),
        (
            "http://cam/a.cgi?user=camuser&pwd=s3cr3t&res=hd",
            "http://cam/a.cgi?user=***&pwd=***&res=hd",
        ),
        ("awss3src secret-access-key=s3cr3t", "awss3src secret-access-key=***"),
        (
            "nvarguscamerasrc sensor-id=0 ! video/x-raw(memory:NVMM),width=1280,format=NV12 "
            "! nvvidconv ! x264enc key-int-max=30 ! appsink",
            "nvarguscamerasrc sensor-id=0 ! video/x-raw(memory:NVMM),width=1280,format=NV12 "
            "! nvvidconv ! x264enc key-int-max=30 ! appsink",
        ),
        ("souphttpsrc user-agent=edgebox ! appsink", "souphttpsrc user-agent=edgebox ! appsink"),
        ("/dev/video0", "/dev/video0"),
        (
            'souphttpsrc location="http://cam/a.cgi?user=camuser&pwd=s3cr3t" ! appsink',
            'souphttpsrc location="http://cam/a.cgi?user=***&pwd=***" ! appsink',
        ),
        (
            "RuntimeError('src user-pw=\\'s3 cr3t\\' ! appsink')",
            "RuntimeError('src user-pw=*** ! appsink')",
        ),
        ("reading failed: error('user-pw=s3cr3t')", "reading failed: error('user-pw=***')"),
    ],
)
def test_credentials_are_masked_and_nothing_else(text, masked):
    assert mask_secrets(text) == masked
    assert mask_secrets(masked) == masked


@pytest.mark.parametrize("source", [PIPELINE, SOUP])
def test_a_pipelines_display_holds_none_of_its_secrets(source):
    spec = parse_source(source)
    assert spec.target == source
    assert not [s for s in SECRETS if s in spec.display], spec.display


def test_a_bad_pipelines_message_holds_none_of_its_secrets():
    with pytest.raises(ValueError) as caught:
        parse_source("rtspsrc location=rtsp://a:hunter2@cam user-pw=s3cr3t ! fakesink")
    assert str(caught.value).startswith(
        "GStreamer pipeline 'rtspsrc location=rtsp://a:***@cam user-pw=*** ! fakesink' must end"
    )


def test_the_log_filter_masks_the_message_and_the_traceback(caplog):
    logger = logging.getLogger("edgebox.test_secrets_mask")
    logger.addFilter(MaskSecrets())
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            try:
                raise RuntimeError(f"cannot open {PIPELINE}")
            except RuntimeError:
                logger.exception("opening '%s' failed", PIPELINE)
    finally:
        logger.filters.clear()
    assert "RuntimeError: cannot open rtspsrc location=rtsp://admin:***@" in caplog.text
    assert not [s for s in SECRETS if s in caplog.text]


def _echoing_opener(spec):
    """OpenCV and GStreamer errors may quote the pipeline they could not open."""
    if "souphttpsrc" in str(spec.target):
        raise RuntimeError(f"GStreamer: cannot open '{spec.target}'")
    raise SourceError(f"GStreamer pipeline '{spec.target}' did not start")


def test_no_surface_shows_a_sources_secrets(stack, caplog):
    bus = stack.bus
    statuses = bus.subscribe(StreamStatus)
    streams = StreamManager(
        (
            StreamSettings(name="cam1", source=PIPELINE, model="lane"),
            StreamSettings(name="cam2", source=SOUP, model="lane"),
        ),
        stack.dataplane,
        bus,
        open_source=_echoing_opener,
        backoff=Backoff(initial_s=60.0, max_s=60.0, factor=1.0),
    )
    app = create_app(
        dashboard_deps(stack, streams=streams),
        DashboardSettings(anonymous_read=True),
        session_key=b"k" * 32,
    )
    ring = state_of(app).events
    events = []
    with caplog.at_level(logging.DEBUG, logger="edgebox"):
        streams.start()
        try:
            reconnecting: set[str] = set()
            deadline = time.monotonic() + 20
            while reconnecting != {"cam1", "cam2"}:
                event = statuses.get(timeout=max(0.0, deadline - time.monotonic()))
                assert event is not None, f"not both reconnecting within 20 s: {events}"
                events.append(event)
                ring.add(event)
                if event.state is StreamState.RECONNECTING:
                    reconnecting.add(event.name)
            client = app.test_client()
            surfaces = {
                "/api/v1/streams": client.get("/api/v1/streams").get_data(as_text=True),
                "/api/v1/events": client.get("/api/v1/events").get_data(as_text=True),
                "/streams": client.get("/streams").get_data(as_text=True),
                "/events": client.get("/events").get_data(as_text=True),
            }
        finally:
            assert streams.stop(10)
            ring.stop(1)
            statuses.close()
    router = Router(Topics("edgebox", "orin"), "orin", qos=1)
    surfaces["mqtt"] = json.dumps([router.route(event).document for event in events])
    surfaces["events"] = json.dumps([event.as_dict() for event in events])
    surfaces["log"] = caplog.text

    assert "did not start" in surfaces["/api/v1/streams"]  # the reason is there, masked
    assert "Traceback" in surfaces["log"] and "GStreamer: cannot open" in surfaces["log"]
    leaks = {where: [s for s in SECRETS if s in text] for where, text in surfaces.items()}
    assert leaks == {where: [] for where in surfaces}
