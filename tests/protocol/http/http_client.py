"""A raw HTTP/1.1 client and a tiny handler for testing ``HttpServer`` on
127.0.0.1: requests are written byte for byte, responses read off the stream in
order, so framing, pipelining and refusals can be checked exactly. Every read
is bounded by the socket's timeout."""

from __future__ import annotations

import json
import select
import socket
import threading
from dataclasses import dataclass

from edgebox.protocol.http.messages import HttpRequest, HttpResponse

HOST = "127.0.0.1"
CLIENT_TIMEOUT_S = 5.0


@dataclass
class Reply:
    status: int
    status_line: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class RawClient:
    """One TCP connection; reads HTTP/1.1 responses off the stream in order."""

    def __init__(self, port: int, timeout_s: float = CLIENT_TIMEOUT_S, source: str = HOST) -> None:
        """``source``: the client's address, another loopback one (127.0.0.2)
        for a second client."""
        self.sock = socket.create_connection(
            (HOST, port), timeout=timeout_s, source_address=(source, 0)
        )
        self.buffer = bytearray()

    def readable(self, timeout_s: float) -> bool:
        """True once the server has sent something (or closed)."""
        ready, _, _ = select.select([self.sock], [], [], timeout_s)
        return bool(ready)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError(f"connection closed; unread: {bytes(self.buffer[:200])!r}")
        self.buffer += chunk

    def read_head(self) -> tuple[int, str, dict[str, str]]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        end = self.buffer.index(b"\r\n\r\n")
        head = bytes(self.buffer[:end]).decode("latin-1")
        del self.buffer[: end + 4]
        status_line, *lines = head.split("\r\n")
        assert status_line.startswith("HTTP/1.1 "), status_line
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status_line.split()[1]), status_line, headers

    def read_response(self, head_only: bool = False) -> Reply:
        status, status_line, headers = self.read_head()
        length = 0 if head_only else int(headers["content-length"])
        while len(self.buffer) < length:
            self._fill()
        body = bytes(self.buffer[:length])
        del self.buffer[:length]
        return Reply(status, status_line, headers, body)

    def assert_closed(self) -> None:
        """The server closed the connection without sending anything more."""
        assert not self.buffer, bytes(self.buffer[:200])
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return
        assert data == b"", f"expected the server to close, got {data[:200]!r}"

    def close(self) -> None:
        self.sock.close()


def http_request(
    method: str = "GET", path: str = "/", body: bytes = b"", headers: dict | None = None
) -> bytes:
    fields = {"Host": "test"}
    if body:
        fields["Content-Length"] = str(len(body))
    fields.update(headers or {})
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class EchoHandler:
    """Answers every request with a JSON description of it; remembers them."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        summary = {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "headers": request.headers,
            "body": bytes(request.body).decode("latin-1"),
            "thread": threading.get_ident(),
        }
        with self._lock:
            self.seen.append(summary)
        return HttpResponse(200, [json.dumps(summary).encode()])
