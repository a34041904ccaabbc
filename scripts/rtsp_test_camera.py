"""An RTSP camera for tests: GStreamer's RTSP server (Debian's
``gir1.2-gst-rtsp-server-1.0``) serving a moving test pattern as H.264 over
RTP, TCP or UDP as the client asks, optionally behind basic auth.

Runs under the system's ``python3`` (the one with ``python3-gi``), never the
venv's: ``tests/rtsp_camera.py`` starts it on a free port and reads its one
line, ``ready rtsp://127.0.0.1:PORT/PATH``, before any client connects.

    /usr/bin/python3 scripts/rtsp_test_camera.py --port 8554 --user cam --password secret
"""

from __future__ import annotations

import argparse
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def launch_line(width: int, height: int, fps: int) -> str:
    """A live test pattern, one key frame a second, so a client that joins
    late (or after the camera restarts) decodes within a second."""
    return (
        f"( videotestsrc is-live=true pattern=ball ! "
        f"video/x-raw,width={width},height={height},framerate={fps}/1 ! "
        f"x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} ! "
        f"rtph264pay name=pay0 pt=96 config-interval=1 )"
    )


STAMP_BITS = 42
"""Milliseconds since the epoch fit in 41 bits until 2039."""
STAMP_BLOCK = 15
"""Pixels per bit, across; the stamp takes the top 16 rows (one macroblock
row, so the encoder keeps its edges) and 630 pixels of width."""


def stamped_launch_line(width: int, height: int, fps: int) -> str:
    """Frames from this script (``StampedFrames``), the wall clock in their top
    rows, through the same encoder and payloader as the test pattern."""
    return (
        f"( appsrc name=frames is-live=true do-timestamp=true format=time "
        f"caps=video/x-raw,format=I420,width={width},height={height},framerate={fps}/1 ! "
        f"x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} ! "
        f"rtph264pay name=pay0 pt=96 config-interval=1 )"
    )


class StampedFrames:
    """Pushes a grey I420 frame every 1/fps seconds whose top 16 rows hold the
    moment it was made, ``time.time()`` in milliseconds, as black and white
    blocks, most significant bit first: the glass of a camera whose clock is
    this machine's (bench/glass_to_result.py reads it back)."""

    def __init__(self, width: int, height: int, fps: int) -> None:
        if width < STAMP_BITS * STAMP_BLOCK:
            raise SystemExit(f"--stamp needs --width >= {STAMP_BITS * STAMP_BLOCK}")
        self.width, self.height, self.fps = width, height, fps
        luma = width * height
        self.rest = bytes([128]) * (luma - 16 * width) + bytes([128]) * (luma // 2)
        self.sources: list = []

    def attach(self, _factory, media) -> None:
        source = media.get_element().get_by_name("frames")
        self.sources.append(source)

    def push(self) -> bool:
        stamp = int(time.time() * 1000)
        row = bytearray(b"\x80" * self.width)
        for bit in range(STAMP_BITS):
            on = (stamp >> (STAMP_BITS - 1 - bit)) & 1
            start = bit * STAMP_BLOCK
            row[start : start + STAMP_BLOCK] = (b"\xeb" if on else b"\x10") * STAMP_BLOCK
        frame = bytes(row) * 16 + self.rest
        for source in self.sources:
            source.emit("push-buffer", Gst.Buffer.new_wrapped(frame))
        return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="an RTSP test camera")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/cam")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=int, default=15)
    parser.add_argument("--user", default="")
    parser.add_argument("--password", default="")
    parser.add_argument(
        "--stamp", action="store_true", help="the wall clock in each frame's top rows"
    )
    args = parser.parse_args(argv)

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    if args.stamp:
        frames = StampedFrames(args.width, args.height, args.fps)
        factory.set_launch(stamped_launch_line(args.width, args.height, args.fps))
        factory.connect("media-configure", frames.attach)
        GLib.timeout_add(max(1, round(1000 / args.fps)), frames.push)
    else:
        factory.set_launch(launch_line(args.width, args.height, args.fps))
    factory.set_shared(True)
    if args.user:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, args.user)
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(args.user, args.password), token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_role_from_structure(
            Gst.Structure.new_from_string(
                f"{args.user}, media.factory.access=true, media.factory.construct=true"
            )
        )
        factory.set_permissions(permissions)
    server.get_mount_points().add_factory(args.path, factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
        return 1
    print(f"ready rtsp://127.0.0.1:{args.port}{args.path}", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
