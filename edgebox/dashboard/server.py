"""The dashboard's own port, served by waitress on its own threads in the
daemon's process."""

from __future__ import annotations

import logging

from flask import Flask

from edgebox.dashboard.app import create_app, state_of
from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.settings import DashboardSettings
from edgebox.wsgi_port import WsgiPort

log = logging.getLogger(__name__)

THREADS = 6
"""Requests answered at once; a load or unload holds one until it is done."""
CONNECTION_LIMIT = 100


class DashboardServer:
    """Started and stopped by the daemon's main thread: the app on its own
    port (``WsgiPort``), and the events ring's thread with it."""

    def __init__(self, app: Flask, host: str, port: int) -> None:
        self.app = app
        self._port = WsgiPort(
            app, host, port, "dashboard", threads=THREADS, connection_limit=CONNECTION_LIMIT
        )

    @classmethod
    def build(cls, deps: DashboardDeps, settings: DashboardSettings, host: str) -> DashboardServer:
        return cls(create_app(deps, settings), host, settings.port)

    def start(self) -> int:
        """Binds and serves; the bound port."""
        port = self._port.start()
        state_of(self.app).events.start()
        return port

    def stop(self, timeout_s: float) -> bool:
        """Stop within ``timeout_s``: requests in progress may finish, then
        every connection is closed; True if the loop ended."""
        state_of(self.app).events.stop(min(1.0, timeout_s))
        return self._port.stop(timeout_s)
