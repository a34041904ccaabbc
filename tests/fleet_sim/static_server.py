"""A stand-in artifact store until tests/artifact_server.py (helper ART's,
with Range support) is merged: http.server serving one folder on a free
127.0.0.1 port, on its own thread, counting the bytes of every file it
sends, per path, so a scenario can say how many bytes a deploy moved."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _CountingHandler(SimpleHTTPRequestHandler):
    def __init__(self, *args, counter: StaticServer, **kwargs) -> None:
        self._counter = counter
        super().__init__(*args, **kwargs)

    def copyfile(self, source, outputfile) -> None:
        while chunk := source.read(64 * 1024):
            outputfile.write(chunk)
            self._counter._count(self.path, len(chunk))

    def log_message(self, format: str, *args) -> None:
        pass


class StaticServer:
    """``url(name)`` is where a file of ``folder`` is served; ``bytes_sent``
    maps each requested path to the bytes sent for it."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sent: Counter[str] = Counter()
        handler = functools.partial(_CountingHandler, directory=str(self.folder), counter=self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="static-server"
        )

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    @property
    def bytes_sent(self) -> dict[str, int]:
        with self._lock:
            return dict(self._sent)

    def _count(self, path: str, size: int) -> None:
        with self._lock:
            self._sent[path] += size

    def start(self) -> StaticServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> StaticServer:
        return self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()
