"""``GET /metrics`` (any other path: 404) on a port of its own (``WsgiPort``:
waitress, a few threads and a connection cap, as a LAN port needs), from a
registry holding only edgebox's collector: not the library's global registry, so no process or
platform collectors another import registered show up, and tests can run
several. The text is ``exposition.render``'s: Triton's counters declared
``counter`` under their own names.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.exposition import wsgi_app
from edgebox.wsgi_port import WsgiPort

THREADS = 2
"""Scrapes answered at once; Prometheus scrapes one at a time."""
CONNECTION_LIMIT = 256
"""Idle connections cost waitress a socket, not a thread; past the cap new
ones wait until one closes (idle ones are closed after 30 s)."""


class MetricsServer:
    """Started and stopped by the daemon's main thread; scrapes run on the
    server's own threads and only read (see ``MetricsCollector``)."""

    def __init__(self, collector: MetricsCollector, host: str, port: int) -> None:
        self.port = 0
        """The bound port once started (the free one picked for port 0)."""
        self.registry = CollectorRegistry()
        self.registry.register(collector)
        self._port = WsgiPort(
            wsgi_app(self.registry),
            host,
            port,
            "metrics",
            threads=THREADS,
            connection_limit=CONNECTION_LIMIT,
        )

    def start(self) -> int:
        """Bind and serve; the bound port (the free one picked for port 0).
        A port in use raises ``OSError``, as HTTP and gRPC do."""
        self.port = self._port.start()
        return self.port

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting and close the socket, so the port is free at once."""
        self._port.stop(timeout_s)
