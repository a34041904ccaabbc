"""A WSGI app on a port of its own, served by waitress: the dashboard and the
metrics endpoint. waitress bounds what a LAN client can take: connections
past ``connection_limit`` wait in the kernel's backlog, idle ones are closed
after ``channel_timeout``, and only ``threads`` requests run at once, so a
client holding sockets open costs no thread each (prometheus-client's own
server starts one per connection)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from waitress import wasyncore
from waitress.server import create_server


class WsgiPort:
    """Started and stopped by the daemon's main thread. ``start`` binds
    (raising OSError when it cannot) and returns at once; waitress's loop runs
    on thread ``name``, requests on its worker threads."""

    def __init__(
        self,
        app: Callable,
        host: str,
        port: int,
        name: str,
        threads: int,
        connection_limit: int,
        channel_timeout_s: int = 30,
    ) -> None:
        self.app = app
        self._host = host
        self._port = port
        self._name = name
        self._threads = threads
        self._connection_limit = connection_limit
        self._channel_timeout_s = channel_timeout_s
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Binds and serves; the bound port (the free one picked for 0)."""
        self._server = create_server(
            self.app,
            host=self._host,
            port=self._port,
            threads=self._threads,
            connection_limit=self._connection_limit,
            channel_timeout=self._channel_timeout_s,
            ident="edgebox",
        )
        self._thread = threading.Thread(target=self._server.run, name=self._name, daemon=True)
        self._thread.start()
        return int(self._server.effective_port)

    def stop(self, timeout_s: float) -> bool:
        """Stop within ``timeout_s``: requests in progress may finish, then
        every connection and the listening socket are closed; True if the
        loop ended."""
        server, self._server = self._server, None
        if server is None or self._thread is None:
            return True
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout_s)
        # Closing from waitress's own loop thread: the loop ends once its map is empty.
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        self._thread.join(max(0.5, timeout_s))
        return not self._thread.is_alive()
