"""A small HTTP/1.1 server: one thread per connection, llhttp (via httptools)
for parsing, bodies read straight into their final buffer.

Why not an asyncio server: measured on the target class of machine (see
``bench/RESULTS.md``), handing each request from an event loop to a worker
thread and back cost more than the whole request budget for small tensors.
Here the connection's own thread parses, runs the inference and writes the
answer, so a request crosses no thread boundary; ONNX Runtime and numpy release
the GIL while they compute. Request bodies land in one 64-byte-aligned buffer
(the binary part aligned where the caller asks), so tensors are numpy views over
the bytes the kernel wrote; responses go out with ``sendmsg`` straight from the
output arrays.

Limits keep it safe on an appliance: at most ``max_connections`` connections
(the next one gets a 503), bodies over ``max_request_bytes`` refused before they
are read (413), idle keep-alive connections closed after ``idle_timeout_s``, a
request whose headers take longer than ``read_timeout_s``, or whose body stalls
for that long, answered 408 and dropped.
"""

from __future__ import annotations

import collections
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import unquote

import httptools
import numpy as np

log = logging.getLogger(__name__)

_ALIGNMENT = 64
_READ_CHUNK = 65536
_IOV_MAX = 1024


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    """Percent-decoded path, without the query string."""
    query: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: memoryview
    """Writable; exactly the body's bytes."""
    peer: str = ""
    """The client's IP address as the socket saw it ("" when unknown): what
    access control decides loopback by."""


@dataclass(slots=True)
class HttpResponse:
    status: int
    body: list = field(default_factory=list)
    """Buffers sent in order without being joined: bytes or C-contiguous arrays."""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[HttpRequest], HttpResponse]


def json_error_response(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, [json.dumps({"error": message}).encode()])


class HttpServer:
    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        max_request_bytes: int = 64 * 1024 * 1024,
        max_connections: int = 64,
        idle_timeout_s: float = 60.0,
        read_timeout_s: float = 30.0,
        align_body_at: Callable[[dict[str, str]], int] | None = None,
    ) -> None:
        self.handler = handler
        self.host = host
        self.requested_port = port
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.read_timeout_s = read_timeout_s
        self.align_body_at = align_body_at
        self.port = 0
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self.stopping = False

    def start(self) -> int:
        """Bind and start accepting; returns the bound port (useful with port 0)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.requested_port))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name="http-accept", daemon=True)
        self._acceptor.start()
        return self.port

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close idle connections, let busy ones finish their
        current request (answered with ``Connection: close``), then return."""
        self.stopping = True
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            if connection.idle:
                connection.shutdown()
        deadline = time.monotonic() + timeout_s
        for connection in connections:
            connection.thread.join(max(0.0, deadline - time.monotonic()))
        if self._acceptor is not None:
            self._acceptor.join(max(0.0, deadline - time.monotonic()))

    @property
    def accepting(self) -> bool:
        """False once the accept loop has died: the watchdog's health signal."""
        return self._acceptor is not None and self._acceptor.is_alive()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self.stopping:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                full = len(self._connections) >= self.max_connections
                if not full:
                    connection = _Connection(self, sock)
                    self._connections.add(connection)
            if full:
                _refuse(sock, self.max_connections)
                continue
            connection.thread.start()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)


def _refuse(sock: socket.socket, limit: int) -> None:
    try:
        sock.settimeout(1.0)
        response = json_error_response(
            HTTPStatus.SERVICE_UNAVAILABLE, f"server busy: {limit} connections already open"
        )
        _send_buffers(
            sock, [_head(response, len(response.body[0]), keep_alive=False), *response.body]
        )
    except OSError:
        pass
    finally:
        sock.close()


class _Message:
    __slots__ = (
        "body",
        "body_size",
        "chunks",
        "expect_continue",
        "headers",
        "headers_deadline",
        "keep_alive",
        "method",
        "received",
        "url",
    )

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}
        self.method = ""
        self.body: memoryview | None = None
        self.body_size = 0
        self.received = 0
        self.chunks: bytearray | None = None
        self.expect_continue = False
        self.keep_alive = True
        self.headers_deadline = 0.0


class _Connection:
    """One client connection, served by its own thread."""

    def __init__(self, server: HttpServer, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.idle = True
        self.thread = threading.Thread(target=self._serve, name="http-conn", daemon=True)
        self._completed: collections.deque[_Message] = collections.deque()
        self._current: _Message | None = None
        self._refusal: HttpResponse | None = None
        try:
            self.peer = str(sock.getpeername()[0])
        except (OSError, IndexError):
            self.peer = ""

    def shutdown(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # httptools callbacks -------------------------------------------------

    def on_message_begin(self) -> None:
        self._current = _Message()
        self._current.headers_deadline = time.monotonic() + self.server.read_timeout_s

    def on_url(self, url: bytes) -> None:
        self._current.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self._current.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        message = self._current
        message.method = self._parser.get_method().decode("ascii")
        headers = message.headers
        limit = self.server.max_request_bytes
        length_text = headers.get("content-length")
        if length_text is not None:
            size = int(length_text)
            if size > limit:
                self._refusal = json_error_response(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"request body of {size} bytes exceeds the limit of {limit} bytes "
                    "(--max-request-bytes)",
                )
                return
            message.body = self._allocate(size, headers)
            message.body_size = size
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            message.chunks = bytearray()
        message.expect_continue = headers.get("expect", "").lower() == "100-continue"

    def on_body(self, data: bytes) -> None:
        message = self._current
        if self._refusal is not None:
            return
        if message.body is not None:
            end = message.received + len(data)
            message.body[message.received : end] = data
            message.received = end
        elif message.chunks is not None:
            message.chunks += data
            limit = self.server.max_request_bytes
            if len(message.chunks) > limit:
                self._refusal = json_error_response(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"chunked request body exceeds the limit of {limit} bytes "
                    "(--max-request-bytes)",
                )

    def on_message_complete(self) -> None:
        message, self._current = self._current, None
        if self._refusal is not None:
            # Refused (or after a refused one): answered by the refusal alone.
            return
        message.keep_alive = self._parser.should_keep_alive()
        self._completed.append(message)

    # serving ---------------------------------------------------------------

    def _allocate(self, size: int, headers: dict[str, str]) -> memoryview:
        """A buffer for the body whose start (or the offset the server was told
        to align) sits on a 64-byte boundary, so numpy views over it are aligned."""
        raw = np.empty(size + _ALIGNMENT, dtype=np.uint8)
        align_at = 0
        if self.server.align_body_at is not None:
            try:
                align_at = max(0, min(size, self.server.align_body_at(headers)))
            except ValueError:
                align_at = 0
        shift = (-(raw.ctypes.data + align_at)) % _ALIGNMENT
        return memoryview(raw)[shift : shift + size]

    def _serve(self) -> None:
        try:
            self._serve_requests()
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.debug("http: connection ended: %s", exc)
        except Exception:
            log.exception("http: connection failed")
        finally:
            self.sock.close()
            self.server._forget(self)

    def _serve_requests(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        chunk = bytearray(_READ_CHUNK)
        view = memoryview(chunk)
        while True:
            if not self._respond_completed():
                return
            if self._refusal is not None:
                self._send(self._refusal, keep_alive=False)
                return
            message = self._current
            if (
                message is not None
                and message.body is not None
                and message.received < message.body_size
            ):
                if not self._read_rest_of_body(message):
                    return
                self._current = None
                message.keep_alive = self._parser.should_keep_alive()
                self._parser = httptools.HttpRequestParser(self)
                if not self._respond(message):
                    return
                continue
            if message is not None and message.chunks is not None and not message.chunks:
                self._continue(message)
            self.idle = message is None
            if self.idle and self.server.stopping:
                return
            self.sock.settimeout(self._read_timeout(message))
            try:
                count = self.sock.recv_into(view)
            except TimeoutError:
                if not self.idle:
                    self._send(
                        json_error_response(HTTPStatus.REQUEST_TIMEOUT, "request timed out"),
                        keep_alive=False,
                    )
                return
            if count == 0:
                return
            self.idle = False
            try:
                self._parser.feed_data(view[:count])
            except httptools.HttpParserUpgrade:
                self._send(
                    json_error_response(
                        HTTPStatus.BAD_REQUEST, "protocol upgrades are not supported"
                    ),
                    keep_alive=False,
                )
                return
            except httptools.HttpParserError as exc:
                # Requests completed before the bad bytes are answered first; after
                # one that asked to close, whatever follows is ignored, not an error.
                if not self._respond_completed():
                    return
                self._send(
                    json_error_response(HTTPStatus.BAD_REQUEST, f"malformed HTTP request: {exc}"),
                    keep_alive=False,
                )
                return

    def _read_timeout(self, message: _Message | None) -> float:
        """Idle connections wait ``idle_timeout_s``; a request's headers must all
        arrive within ``read_timeout_s`` of its first byte (a client trickling
        header bytes cannot hold a connection), and each body read gets
        ``read_timeout_s`` (a large upload over a slow link is not cut off)."""
        if message is None:
            return self.server.idle_timeout_s
        if not message.method:
            return max(0.001, message.headers_deadline - time.monotonic())
        return self.server.read_timeout_s

    def _respond_completed(self) -> bool:
        """Answer the requests parsed so far, in order; False when the
        connection must close."""
        while self._completed:
            if not self._respond(self._completed.popleft()):
                return False
        return True

    def _continue(self, message: _Message) -> None:
        """``100 Continue``, once, to a client that waits for it before the body."""
        if message.expect_continue:
            message.expect_continue = False
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _read_rest_of_body(self, message: _Message) -> bool:
        if message.received == 0:
            self._continue(message)
        self.sock.settimeout(self.server.read_timeout_s)
        body = message.body
        while message.received < message.body_size:
            try:
                count = self.sock.recv_into(body[message.received :])
            except TimeoutError:
                self._send(
                    json_error_response(HTTPStatus.REQUEST_TIMEOUT, "request body timed out"),
                    keep_alive=False,
                )
                return False
            if count == 0:
                return False
            message.received += count
        return True

    def _respond(self, message: _Message) -> bool:
        """Run the handler and answer; False when the connection must close."""
        url = httptools.parse_url(message.url)
        if message.body is not None:
            body = message.body
        elif message.chunks is not None:
            body = memoryview(message.chunks)
        else:
            body = memoryview(bytearray())
        request = HttpRequest(
            method=message.method,
            path=unquote(url.path.decode("latin-1")),
            query=(url.query or b"").decode("latin-1"),
            headers=message.headers,
            body=body,
            peer=self.peer,
        )
        try:
            response = self.server.handler(request)
        except Exception:
            log.exception("http: handler failed for %s %s", request.method, request.path)
            response = json_error_response(
                HTTPStatus.INTERNAL_SERVER_ERROR, "internal server error"
            )
        # Read after the handler: a stop() that came meanwhile closes this connection.
        keep_alive = message.keep_alive and not self.server.stopping
        self._send(response, keep_alive, head_only=request.method == "HEAD")
        return keep_alive

    def _send(self, response: HttpResponse, keep_alive: bool, head_only: bool = False) -> None:
        """Send ``response``; for HEAD, its headers only, with the length a GET would get."""
        length = sum(_nbytes(b) for b in response.body)
        head = _head(response, length, keep_alive)
        _send_buffers(self.sock, [head] if head_only else [head, *response.body])


def _nbytes(buffer) -> int:
    return buffer.nbytes if isinstance(buffer, (np.ndarray, memoryview)) else len(buffer)


def _head(response: HttpResponse, length: int, keep_alive: bool) -> bytes:
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    lines = [
        f"HTTP/1.1 {response.status} {phrase}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {length}",
    ]
    lines += [f"{name}: {value}" for name, value in response.headers]
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _send_buffers(sock: socket.socket, buffers: list) -> None:
    views = [memoryview(b).cast("B") for b in buffers if _nbytes(b)]
    while views:
        sent = sock.sendmsg(views[:_IOV_MAX])
        while sent:
            first = views[0]
            if sent >= len(first):
                sent -= len(first)
                views.pop(0)
            else:
                views[0] = first[sent:]
                sent = 0
