"""The dashboard's own port, served by waitress on its own threads in the
daemon's process."""

from __future__ import annotations

import logging
import threading

from flask import Flask
from waitress import wasyncore
from waitress.server import create_server

from edgebox.dashboard.app import create_app, state_of
from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.settings import DashboardSettings

log = logging.getLogger(__name__)

THREADS = 6
"""Requests answered at once; a load or unload holds one until it is done."""
CONNECTION_LIMIT = 100


class DashboardServer:
    """Started and stopped by the daemon's main thread. ``start`` binds
    (raising OSError when it cannot) and returns at once; waitress's loop
    runs on thread ``dashboard``, requests on its worker threads."""

    def __init__(self, app: Flask, host: str, port: int) -> None:
        self.app = app
        self._host = host
        self._port = port
        self._server = None
        self._thread: threading.Thread | None = None

    @classmethod
    def build(cls, deps: DashboardDeps, settings: DashboardSettings, host: str) -> DashboardServer:
        return cls(create_app(deps, settings), host, settings.port)

    def start(self) -> int:
        """Binds and serves; the bound port."""
        self._server = create_server(
            self.app,
            host=self._host,
            port=self._port,
            threads=THREADS,
            connection_limit=CONNECTION_LIMIT,
            channel_timeout=30,
            ident="edgebox",
        )
        state_of(self.app).events.start()
        self._thread = threading.Thread(target=self._server.run, name="dashboard", daemon=True)
        self._thread.start()
        return int(self._server.effective_port)

    def stop(self, timeout_s: float) -> bool:
        """Stop within ``timeout_s``: requests in progress may finish, then
        every connection is closed; True if the loop ended."""
        state_of(self.app).events.stop(min(1.0, timeout_s))
        server = self._server
        if server is None or self._thread is None:
            return True
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout_s)
        # Closing from waitress's own loop thread: the loop ends once its map is empty.
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        self._thread.join(max(0.5, timeout_s))
        return not self._thread.is_alive()
