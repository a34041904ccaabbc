"""``GET /metrics`` on a port of its own, served by prometheus-client's WSGI
server (a thread per scrape) from a registry holding only edgebox's
collector: not the library's global registry, so no process or platform
collectors another import registered show up, and tests can run several.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, start_http_server

from edgebox.metrics.collector import MetricsCollector


class MetricsServer:
    """Started and stopped by the daemon's main thread; scrapes run on the
    server's own threads and only read (see ``MetricsCollector``)."""

    def __init__(self, collector: MetricsCollector, host: str, port: int) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(collector)
        self._host = host
        self._port = port
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; the bound port (the free one picked for port 0).
        A port in use raises ``OSError``, as HTTP and gRPC do."""
        self._server, self._thread = start_http_server(
            self._port, addr=self._host, registry=self.registry
        )
        return self._server.server_port

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting and close the socket, so the port is free at once; a
        scrape in progress finishes on its own (daemon) thread."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout_s)
        self._server = None
