"""The dashboard's own port: waitress on its own threads, stopped in time."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from dashboard_client import dashboard_deps

from edgebox.dashboard.server import DashboardServer


def test_serves_on_a_free_port_and_stops(stack, make_app):
    server = DashboardServer(make_app(anonymous_read=True), "127.0.0.1", 0)
    port = server.start()
    assert port > 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/overview", timeout=5) as reply:
        assert reply.status == 200
        assert reply.headers["X-Frame-Options"] == "DENY"
        assert json.load(reply)["models"] == {"ready": 0, "total": 0}
    assert server.stop(5)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_port_in_use_raises_at_start(stack, make_app):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = DashboardServer(make_app(), "127.0.0.1", taken.getsockname()[1])
        with pytest.raises(OSError):
            server.start()
        assert server.stop(1)


def test_build_makes_the_app_from_the_settings(stack, tmp_path):
    from edgebox.dashboard.settings import DashboardSettings

    settings = DashboardSettings(port=0, session_key_path=tmp_path / "key")
    server = DashboardServer.build(dashboard_deps(stack), settings, "127.0.0.1")
    assert (tmp_path / "key").stat().st_size == 32
    port = server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/session", timeout=5) as r:
            assert json.load(r)["anonymous_read"] is False
    finally:
        assert server.stop(5)
