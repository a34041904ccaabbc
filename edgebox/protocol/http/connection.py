"""One client connection of the HTTP server: who owns it now (``state``), when
the I/O thread gives up on it (``deadline``), and the answering that runs the
handler and writes the response with ``sendmsg`` (a streamed body with
``sendall``, chunk by chunk, holding the worker until it ends). Turning bytes
into complete requests is the base class's job (``request_reader``).

Threads and ownership. A ``Connection`` belongs to exactly one thread at a
time, never two: the server's I/O thread while it is idle, mid-request,
finishing a slow write or closing, or the one worker it was handed to while it
holds a complete request; ``state`` says which. A worker answers every complete
request in order, then lingers for the next one (the fast path) and returns the
connection with a ``verdict`` saying what the I/O thread should do next.

A worker writes for as long as the client takes the bytes promptly; what is
left after ``_SEND_STALL_S`` (``_WORKER_SEND_BUDGET_S`` in all) is finished by
the I/O thread, so a slow reader never holds a worker.
"""

from __future__ import annotations

import logging
import math
import select
import socket
import time
from http import HTTPStatus
from typing import Protocol
from urllib.parse import unquote

import httptools

from edgebox.protocol.http.messages import (
    IOV_MAX,
    Handler,
    HttpRequest,
    HttpResponse,
    drop_sent,
    json_error_response,
    nbytes,
    response_head,
)
from edgebox.protocol.http.request_reader import ParsedRequest, ReadLimits, RequestReader
from edgebox.protocol.http.worker import Worker

log = logging.getLogger(__name__)

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


class ConnectionServer(ReadLimits, Protocol):
    """What a connection reads from and asks of its server (``HttpServer``)."""

    min_transfer_bytes_per_s: float
    handler: Handler
    stopping: bool

    def await_request(self, sock: socket.socket, worker: Worker) -> bool: ...


class Connection(RequestReader):
    """One client connection. Owned by the I/O thread, or by the one worker it
    was handed to (``state`` says which); never by two threads at once."""

    server: ConnectionServer

    def __init__(self, server: ConnectionServer, sock: socket.socket, peer: str) -> None:
        super().__init__(server, sock)
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
        self.drain_bytes_left = 0
        """What the I/O thread still discards while draining before it closes."""
        self.close_after = False
        self._outgoing: list[memoryview] = []

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

    def _respond(self, message: ParsedRequest) -> bool:
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
