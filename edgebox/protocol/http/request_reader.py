"""The reading side of an HTTP connection: the llhttp parser's callbacks (via
httptools) that turn bytes into complete requests, and the reading that puts
a body straight into its final buffer, aligned for numpy.

Limits enforced while parsing, each answered after the requests pipelined
before it: a body over ``max_request_bytes`` gets 413 before it is read, a
body the ``BodyBudget`` has no room for gets 503, a URL over ``MAX_URL_BYTES``
gets 414 and a request head over ``MAX_HEAD_BYTES`` gets 431. The refusal
waits in ``_refusal`` for the connection to answer it
(``Connection.queue_refusal``).

Threads: whichever thread owns the connection reads (``connection``'s
docstring): the I/O thread, or a worker in its fast path.
"""

from __future__ import annotations

import collections
import socket
import time
import weakref
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

import httptools
import numpy as np

from edgebox.protocol.http.body_budget import UNCOUNTED_BODY_BYTES, BodyBudget, ChunkedBody
from edgebox.protocol.http.messages import HttpResponse, json_error_response

_ALIGNMENT = 64
MAX_URL_BYTES = 65535
"""Longest request target accepted (httptools cannot parse longer ones)."""
MAX_HEAD_BYTES = 256 * 1024
"""Longest request line plus headers accepted, counted as received: a URL at
its limit and 64 KiB of headers fit with room to spare."""


class ReadLimits(Protocol):
    """What reading a request reads from the server (``HttpServer``)."""

    read_timeout_s: float
    max_request_bytes: int
    body_budget: BodyBudget
    align_body_at: Callable[[dict[str, str]], int] | None


class ParsedRequest:
    """One request as it arrives: head, then body, with the deadlines that
    apply to it; complete once it is in ``RequestReader.completed``."""

    __slots__ = (
        "body",
        "body_size",
        "body_started",
        "chunks",
        "expect_continue",
        "head_bytes",
        "headers",
        "headers_deadline",
        "headers_done",
        "keep_alive",
        "method",
        "received",
        "upgrade",
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
        self.upgrade = False
        self.headers_done = False
        self.headers_deadline = 0.0
        self.body_started = 0.0
        self.head_bytes = 0


class RequestReader:
    """Bytes in, complete requests out (``completed``), or a refusal. The base
    of ``Connection``, which answers them; owned by one thread at a time."""

    def __init__(self, server: ReadLimits, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self._parser = httptools.HttpRequestParser(self)
        self.completed: collections.deque[ParsedRequest] = collections.deque()
        self._current: ParsedRequest | None = None
        self._refusal: HttpResponse | None = None

    @property
    def idle(self) -> bool:
        """No request under way: nothing partly received, nothing to answer."""
        return self._current is None and not self.has_work

    @property
    def has_work(self) -> bool:
        return bool(self.completed) or self._refusal is not None

    # httptools callbacks -------------------------------------------------

    def on_message_begin(self) -> None:
        self._current = ParsedRequest()
        self._current.headers_deadline = time.monotonic() + self.server.read_timeout_s

    def on_url(self, url: bytes) -> None:
        if self._refusal is not None:
            return
        message = self._current
        message.url += url
        if len(message.url) > MAX_URL_BYTES:
            self._refusal = json_error_response(
                HTTPStatus.REQUEST_URI_TOO_LONG,
                f"request URL exceeds the limit of {MAX_URL_BYTES} bytes",
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refusal is not None:
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self._current.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        message = self._current
        message.headers_done = True
        message.body_started = time.monotonic()
        if self._refusal is not None:
            return
        message.method = self._parser.get_method().decode("ascii")
        message.upgrade = self._parser.should_upgrade()
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
            body = self._allocate(size, headers)
            if body is None:
                self._refusal = self.server.body_budget.refusal(size)
                return
            message.body = body
            message.body_size = size
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            message.chunks = ChunkedBody(self.server.body_budget)
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
            if not message.chunks.take(data):
                self._refusal = self.server.body_budget.refusal(len(message.chunks) + len(data))
                return
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
        self.completed.append(message)

    # reading (the I/O thread, or a worker in its fast path) ------------------

    def _allocate(self, size: int, headers: dict[str, str]) -> memoryview | None:
        """A buffer for the body whose start (or the offset the server was told
        to align) sits on a 64-byte boundary, so numpy views over it are
        aligned; None when the body budget has no room for it."""
        counted = size >= UNCOUNTED_BODY_BYTES
        if counted and not self.server.body_budget.reserve(size):
            return None
        raw = np.empty(size + _ALIGNMENT, dtype=np.uint8)
        if counted:
            weakref.finalize(raw, self.server.body_budget.release, size)
        align_at = 0
        if self.server.align_body_at is not None:
            try:
                align_at = max(0, min(size, self.server.align_body_at(headers)))
            except ValueError:
                align_at = 0
        shift = (-(raw.ctypes.data + align_at)) % _ALIGNMENT
        return memoryview(raw)[shift : shift + size]

    def receive(self, chunk: memoryview) -> int:
        """One ``recv``, parsed; 0 at end of stream. A body whose length is
        known goes straight into its buffer, past the parser. Raises what
        ``recv`` raises: BlockingIOError (non-blocking socket, nothing there),
        TimeoutError (a worker's timed wait), or another OSError."""
        message = self._current
        if (
            message is not None
            and message.body is not None
            and message.received < message.body_size
        ):
            count = self.sock.recv_into(message.body[message.received :])
            if count:
                message.received += count
                if message.received == message.body_size:
                    self._current = None
                    message.keep_alive = self._parser.should_keep_alive()
                    self._parser = httptools.HttpRequestParser(self)
                    self.completed.append(message)
            return count
        count = self.sock.recv_into(chunk)
        if count:
            self._feed(chunk[:count])
        return count

    def _feed(self, data: memoryview) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # The upgrade request itself is complete but not served; those before it are.
            self.completed = collections.deque(m for m in self.completed if not m.upgrade)
            self._current = None
            self._refuse_once(HTTPStatus.BAD_REQUEST, "protocol upgrades are not supported")
            return
        except httptools.HttpParserError as exc:
            # Requests completed before the bad bytes are answered first.
            self._refuse_once(HTTPStatus.BAD_REQUEST, f"malformed HTTP request: {exc}")
            return
        message = self._current
        if self._refusal is None and message is not None and not message.headers_done:
            message.head_bytes += len(data)
            if message.head_bytes > MAX_HEAD_BYTES:
                self._refusal = json_error_response(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "request head (request line and headers) exceeds the limit of "
                    f"{MAX_HEAD_BYTES} bytes",
                )

    def _refuse_once(self, status: int, message: str) -> None:
        if self._refusal is None:
            self._refusal = json_error_response(status, message)

    def send_continue(self) -> None:
        """``100 Continue``, once, to a client that waits for it before the
        body; sent only while no answer is being written, so it goes whole."""
        message = self._current
        if (
            message is not None
            and message.expect_continue
            and message.received == 0
            and not message.chunks
        ):
            message.expect_continue = False
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
