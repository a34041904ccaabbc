"""One client connection of the HTTP server: the llhttp parser's callbacks
(via httptools) that turn bytes into complete requests, the reading that puts a
body straight into its final buffer, and the answering that runs the handler
and writes the response with ``sendmsg`` (a streamed body with ``sendall``,
chunk by chunk, holding the worker until it ends).

Threads and ownership. A ``Connection`` belongs to exactly one thread at a
time, never two: the server's I/O thread while it is idle, mid-request,
finishing a slow write or closing, or the one worker it was handed to while it
holds a complete request; ``state`` says which. A worker answers every complete
request in order, then lingers for the next one (the fast path) and returns the
connection with a ``verdict`` saying what the I/O thread should do next.

Limits enforced while parsing, each answered after the requests pipelined
before it: a body over ``max_request_bytes`` gets 413 before it is read, a
body the ``BodyBudget`` has no room for gets 503, a URL over ``MAX_URL_BYTES``
gets 414 and a request head over ``MAX_HEAD_BYTES`` gets 431. A worker writes
for as long as the client takes the bytes promptly; what is left after
``_SEND_STALL_S`` (``_WORKER_SEND_BUDGET_S`` in all) is finished by the I/O
thread, so a slow reader never holds a worker.
"""

from __future__ import annotations

import collections
import logging
import math
import select
import socket
import time
import weakref
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import unquote

import httptools
import numpy as np

from edgebox.protocol.http.body_budget import UNCOUNTED_BODY_BYTES, ChunkedBody
from edgebox.protocol.http.messages import (
    IOV_MAX,
    HttpRequest,
    HttpResponse,
    drop_sent,
    json_error_response,
    nbytes,
    response_head,
)

if TYPE_CHECKING:
    from edgebox.protocol.http.server import HttpServer, Worker

log = logging.getLogger(__name__)

_ALIGNMENT = 64
MAX_URL_BYTES = 65535
"""Longest request target accepted (httptools cannot parse longer ones)."""
MAX_HEAD_BYTES = 256 * 1024
"""Longest request line plus headers accepted, counted as received: a URL at
its limit and 64 KiB of headers fit with room to spare."""
_FAST_READ_BUDGET_S = 0.05
_SEND_STALL_S = 0.05
_WORKER_SEND_BUDGET_S = 0.5
_POLL_GONE = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR | select.POLLNVAL

# Connection states: who owns the socket and what it waits for.
READING = "reading"  # I/O thread: waits for request bytes
WORKING = "working"  # a worker: answers complete requests
WRITING = "writing"  # I/O thread: finishes a response the worker gave up
DRAINING = "draining"  # I/O thread: answer sent, write side shut, discards until EOF
CLOSE = "close"  # only as a worker's verdict: close at once


class _Message:
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


class Connection:
    """One client connection. Owned by the I/O thread, or by the one worker it
    was handed to (``state`` says which); never by two threads at once."""

    def __init__(self, server: HttpServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.state = READING
        self.events = 0
        """The selector events registered; 0 when not registered."""
        self.verdict = READING
        """What a worker asks the I/O thread to do next with the connection."""
        self.waiting = False
        """Counted among its address's waiting connections (the server's)."""
        self.probation_deadline = 0.0
        """When a connection past its address's cap of waiting ones must have
        delivered a request; 0 when not on probation."""
        self.idle_deadline = 0.0
        self.send_deadline = 0.0
        self.drain_deadline = 0.0
        self.close_after = False
        self._outgoing: list[memoryview] = []
        self._parser = httptools.HttpRequestParser(self)
        self.completed: collections.deque[_Message] = collections.deque()
        self._current: _Message | None = None
        self._refusal: HttpResponse | None = None

    @property
    def idle(self) -> bool:
        """No request under way: nothing partly received, nothing to answer."""
        return self._current is None and not self.has_work

    @property
    def has_work(self) -> bool:
        return bool(self.completed) or self._refusal is not None

    def deadline(self) -> float:
        """When the I/O thread gives up on this connection in its current state."""
        if self.state == READING:
            return min(self._read_deadline(), self.probation_deadline or math.inf)
        if self.state == WRITING:
            return self.send_deadline
        if self.state == DRAINING:
            return self.drain_deadline
        return math.inf

    def _read_deadline(self) -> float:
        message = self._current
        if message is None:
            return self.idle_deadline
        if not message.headers_done:
            return message.headers_deadline
        received = message.received if message.chunks is None else len(message.chunks)
        server = self.server
        return (
            message.body_started
            + server.read_timeout_s
            + received / server.min_transfer_bytes_per_s
        )

    def client_gone(self) -> bool:
        fd = self.sock.fileno()
        if fd < 0:
            return True
        poller = select.poll()
        poller.register(fd, _POLL_GONE)
        try:
            events = poller.poll(0)
        except OSError:
            return True
        return any(revents & _POLL_GONE for _, revents in events)

    # httptools callbacks -------------------------------------------------

    def on_message_begin(self) -> None:
        self._current = _Message()
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

    # answering (a worker) -------------------------------------------------------

    def serve(self, worker: Worker) -> None:
        """Answer the complete requests in order, then wait briefly for the next
        one (the fast path); sets ``verdict`` for the I/O thread."""
        while True:
            while self.completed:
                message = self.completed.popleft()
                keep_alive = self._respond(message)
                if not keep_alive:
                    self.completed.clear()
                    self._refusal = None
                if self._outgoing:
                    self.verdict = WRITING
                    return
                if not keep_alive:
                    self.verdict = DRAINING
                    return
            if self._refusal is not None:
                self.queue_refusal()
                self._push()
                self.verdict = WRITING if self._outgoing else DRAINING
                return
            if not self._linger(worker):
                return

    def _linger(self, worker: Worker) -> bool:
        """Wait (up to ``linger_s``, unless nudged) for the next request, then
        read it while it keeps coming, within ``_FAST_READ_BUDGET_S``. True
        when there is something to answer; else False with ``verdict`` set."""
        self.verdict = READING
        if not self.server.await_request(self.sock, worker):
            return False
        budget_end = time.monotonic() + _FAST_READ_BUDGET_S
        while True:
            self.sock.settimeout(max(0.001, budget_end - time.monotonic()))
            try:
                count = self.receive(worker.chunk)
            except TimeoutError:
                return False
            if count == 0:
                self.verdict = CLOSE
                return False
            if self.has_work:
                return True
            self.send_continue()
            if time.monotonic() >= budget_end:
                return False

    def _respond(self, message: _Message) -> bool:
        """Run the handler and answer; False when the connection must close."""
        try:
            url = httptools.parse_url(message.url)
        except httptools.HttpParserInvalidURLError as exc:
            self._send(
                json_error_response(HTTPStatus.BAD_REQUEST, f"malformed HTTP request: {exc}"),
                keep_alive=False,
            )
            return False
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
            client_gone=self.client_gone,
        )
        try:
            response = self.server.handler(request)
        except BaseException:
            # BaseException too: a model raising SystemExit must not take the worker.
            log.exception("http: handler failed for %s %s", request.method, request.path)
            response = json_error_response(
                HTTPStatus.INTERNAL_SERVER_ERROR, "internal server error"
            )
        # Read after the handler: a stop() that came meanwhile closes this connection.
        keep_alive = message.keep_alive and not self.server.stopping
        if response.stream is not None:
            return self._send_stream(response, keep_alive)
        self._send(response, keep_alive, head_only=request.method == "HEAD")
        return keep_alive

    def _send_stream(self, response: HttpResponse, keep_alive: bool) -> bool:
        """Send a streamed body chunk by chunk (chunked transfer encoding) as
        its iterator yields, blocking this worker until it ends: a chunk the
        client does not take within ``read_timeout_s`` ends the stream and the
        connection. False when the connection must close."""
        stream = response.stream
        self.sock.settimeout(self.server.read_timeout_s)
        try:
            self.sock.sendall(response_head(response, None, keep_alive))
            for chunk in stream:
                if chunk:
                    self.sock.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            self.sock.sendall(b"0\r\n\r\n")
        except OSError as exc:
            log.debug("http: a streamed response ended early: %r", exc)
            return False
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return keep_alive

    def _send(self, response: HttpResponse, keep_alive: bool, head_only: bool = False) -> None:
        """Send ``response``; for HEAD, its headers only, with the length a GET would get."""
        length = sum(nbytes(b) for b in response.body)
        head = response_head(response, length, keep_alive)
        self._queue([head] if head_only else [head, *response.body], close_after=not keep_alive)
        self._push()

    def _push(self) -> None:
        """Write from the worker while the client takes the bytes; what it has
        not taken within ``_SEND_STALL_S`` (or ``_WORKER_SEND_BUDGET_S`` in
        all) stays in ``_outgoing`` for the I/O thread, with a deadline."""
        views = self._outgoing
        self.sock.settimeout(_SEND_STALL_S)
        started = time.monotonic()
        while views:
            try:
                sent = self.sock.sendmsg(views[:IOV_MAX])
            except TimeoutError:
                break
            drop_sent(views, sent)
            if time.monotonic() - started > _WORKER_SEND_BUDGET_S:
                break
        if views:
            left = sum(len(v) for v in views)
            server = self.server
            self.send_deadline = (
                time.monotonic() + server.read_timeout_s + left / server.min_transfer_bytes_per_s
            )

    # answering from the I/O thread ---------------------------------------------

    def _queue(self, buffers: list, close_after: bool) -> None:
        self._outgoing = [memoryview(b).cast("B") for b in buffers if nbytes(b)]
        self.close_after = close_after

    def queue_refusal(self) -> None:
        refusal, self._refusal = self._refusal, None
        self.completed.clear()
        self._current = None
        head = response_head(refusal, len(refusal.body[0]), keep_alive=False)
        self._queue([head, *refusal.body], True)
        self.send_deadline = time.monotonic() + self.server.read_timeout_s

    def queue_timeout(self) -> None:
        """408 for the request under way, which ran past its deadline."""
        message = self._current
        text = "request timed out" if not message.headers_done else "request body timed out"
        self._refusal = json_error_response(HTTPStatus.REQUEST_TIMEOUT, text)
        self.queue_refusal()

    def write_some(self) -> bool:
        """Non-blocking: True once everything queued is sent."""
        views = self._outgoing
        for _ in range(16):
            if not views:
                return True
            try:
                sent = self.sock.sendmsg(views[:IOV_MAX])
            except BlockingIOError:
                return False
            drop_sent(views, sent)
        return not views
