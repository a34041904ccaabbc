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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="an RTSP test camera")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/cam")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=int, default=15)
    parser.add_argument("--user", default="")
    parser.add_argument("--password", default="")
    args = parser.parse_args(argv)

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
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
