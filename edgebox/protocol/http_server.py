"""A small HTTP/1.1 server: one I/O thread waits on every socket, a bounded pool
of worker threads answers complete requests; llhttp (via httptools) parses,
bodies are read straight into their final buffer.

Threads and ownership. Each connection belongs to exactly one thread at a
time. The I/O thread (``http-io``, a ``selectors`` loop: epoll on Linux) owns
every connection that is idle, mid-request, finishing a slow write or closing:
it accepts, reads, feeds the parser and enforces every deadline, so a client
that never completes a request costs a socket and a little memory, never a
thread. Only a connection holding a complete request (headers and whole body,
already in its aligned buffer) is handed to a worker (``http-worker-N``,
``thread_count`` of them), which runs the handler and writes the answer with
``sendmsg`` from the output arrays, then hands the connection back.

Why workers write and then wait briefly: measured on the target class of
machine (``bench/RESULTS.md``), handing each request from an event loop to a
worker thread and back cost more than the whole request budget for small
tensors. So after answering, a worker waits up to ``linger_s`` for the client's
next request on that connection and, if it comes, reads and answers it itself:
a keep-alive client sending back to back crosses no thread boundary, as with
a thread per connection. Lingering never delays other work: it is skipped
while connections are queued for a worker, and a lingering worker is nudged
(through its own socket pair) the moment one is queued; and the next request
must arrive in full within ``_FAST_READ_BUDGET_S``, or the I/O thread takes
over its reading. A response the client does not take in ``_SEND_STALL_S`` (a
slow or absent reader) is finished by the I/O thread, not the worker.

Limits keep it safe on an appliance, each with a total deadline rather than a
per-read one, since a byte every few seconds would reset a per-read timer:

- at most ``max_connections`` connections, ``max_connections_per_client`` from
  one address (loopback included); the next one gets a 503 that the client can
  read (the server shuts its side and discards what the client sends for up to
  ``_DRAIN_S`` before closing, so the 503 is not lost to a reset);
- a request's line and headers must arrive within ``read_timeout_s`` of its
  first byte; a body within ``read_timeout_s`` plus one second per
  ``min_transfer_bytes_per_s`` bytes received (a large upload over a slow link
  is not cut off, a trickle is); else 408 and close;
- a response must be taken within ``read_timeout_s`` plus one second per
  ``min_transfer_bytes_per_s`` bytes left when the worker gave it up, else the
  connection is closed;
- idle keep-alive connections are closed after ``idle_timeout_s``;
- bodies held at once (received or arriving, until their request is done
  with them) are capped at ``max_body_bytes_in_flight``: a body that would go
  over is refused with a 503 before it is read, so many clients each declaring
  a large body and sending it slowly cannot grow the daemon's memory without
  bound;
- bodies over ``max_request_bytes`` are refused before they are read (413), URLs
  over 65,535 bytes get 414 and request heads over 256 KiB get 431, each after
  the requests pipelined before it are answered.
"""

from __future__ import annotations

import collections
import errno
import json
import logging
import math
import queue
import resource
import select
import selectors
import socket
import threading
import time
import weakref
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
MAX_URL_BYTES = 65535
"""Longest request target accepted (httptools cannot parse longer ones)."""
MAX_HEAD_BYTES = 256 * 1024
"""Longest request line plus headers accepted, counted as received: a URL at
its limit and 64 KiB of headers fit with room to spare."""
_LINGER_S = 0.05
"""Long enough for a client on a busy two-core box, or a camera at 20 fps, to
send its next request; free otherwise, since a queued request cuts it short."""
_FAST_READ_BUDGET_S = 0.05
_SEND_STALL_S = 0.05
_WORKER_SEND_BUDGET_S = 0.5
_DRAIN_S = 2.0
_MAX_REFUSING = 128
"""Refused connections kept open at once to deliver their 503; past this a
refused connection is closed at once (a flood, not a client to inform)."""
_FD_RESERVE = 256
"""File descriptors left for everything but connections: models, logs, pipes."""
_SWEEP_GRANULARITY_S = 0.01
_ACCEPTS_PER_WAKE = 64
_UNCOUNTED_BODY_BYTES = 65536
"""Bodies this small are not counted against ``max_body_bytes_in_flight``:
connections bound them (1024 x 64 KiB), and a small request keeps its hot path
free of the bookkeeping."""
_POLL_GONE = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR | select.POLLNVAL


def _never() -> bool:
    return False


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
    client_gone: Callable[[], bool] = _never
    """True once the client has closed (or half-closed) its connection, so
    nobody will read the answer. Cheap (one non-blocking ``poll``) and callable
    from any thread while the handler runs: what lets a queued inference be
    skipped. Pipelined bytes still unread do not make it true; a close does."""


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


# Connection states: who owns the socket and what it waits for.
_READING = "reading"  # I/O thread: waits for request bytes
_WORKING = "working"  # a worker: answers complete requests
_WRITING = "writing"  # I/O thread: finishes a response the worker gave up
_DRAINING = "draining"  # I/O thread: answer sent, write side shut, discards until EOF
_CLOSE = "close"  # only as a worker's verdict: close at once

_LISTENER = object()
_WAKE = object()


def default_body_bytes_in_flight(max_request_bytes: int) -> int:
    """Room for four of the largest requests, and never less than 256 MiB."""
    return max(4 * max_request_bytes, 256 * 1024 * 1024)


class BodyBudget:
    """Bytes of request bodies held at once, across every connection: reserved
    when a body's size is known (before it is read), released when its buffer is
    freed (a finalizer on the buffer, so a body a handler still holds stays
    counted). Called from the I/O thread and workers; finalizers run on
    whichever thread drops the last reference."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self._held + size > self.limit:
                return False
            self._held += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._held -= size

    def refusal(self, size: int) -> HttpResponse:
        return json_error_response(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"server busy: a request body of {size} bytes would take the bodies held at once "
            f"past {self.limit} bytes (--http-max-body-bytes-in-flight); retry later",
        )


class _ChunkedBody(bytearray):
    """A chunked body as it grows, each piece reserved before it is kept; a
    subclass of bytearray so that a finalizer can release what it reserved."""

    def __init__(self, budget: BodyBudget) -> None:
        super().__init__()
        self.budget = budget
        self.reserved = [0]
        weakref.finalize(self, _release_reserved, budget, self.reserved)

    def take(self, data: bytes) -> bool:
        """Append ``data`` if the budget has room; False (nothing kept) if not."""
        if not self.budget.reserve(len(data)):
            return False
        self.reserved[0] += len(data)
        self.extend(data)
        return True


def _release_reserved(budget: BodyBudget, reserved: list[int]) -> None:
    budget.release(reserved[0])


class HttpServer:
    """Owned by the daemon: ``start`` and ``stop`` from its main thread; the
    handler is called on worker threads, many at once."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        max_request_bytes: int = 64 * 1024 * 1024,
        max_connections: int = 1024,
        max_connections_per_client: int = 64,
        thread_count: int = 32,
        idle_timeout_s: float = 60.0,
        read_timeout_s: float = 30.0,
        min_transfer_bytes_per_s: float = 65536.0,
        max_body_bytes_in_flight: int | None = None,
        linger_s: float = _LINGER_S,
        align_body_at: Callable[[dict[str, str]], int] | None = None,
    ) -> None:
        self.handler = handler
        self.host = host
        self.requested_port = port
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.max_connections_per_client = max_connections_per_client
        self.thread_count = max(1, thread_count)
        self.idle_timeout_s = idle_timeout_s
        self.read_timeout_s = read_timeout_s
        self.min_transfer_bytes_per_s = min_transfer_bytes_per_s
        self.body_budget = BodyBudget(
            max_body_bytes_in_flight
            if max_body_bytes_in_flight is not None
            else default_body_bytes_in_flight(max_request_bytes)
        )
        self.linger_s = linger_s
        self.align_body_at = align_body_at
        self.port = 0
        self.stopping = False
        self._listener: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._io_thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        self._ready: queue.SimpleQueue[_Connection | None] = queue.SimpleQueue()
        """Connections with a complete request, waiting for a worker; each is
        queued at most once, so the queue holds at most ``max_connections``."""
        self._returned: collections.deque[_Connection] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        """Guards ``_io_done`` against hand-backs and ``_lingering``."""
        self._io_done = False
        self._lingering: set[_Worker] = set()
        # The rest belongs to the I/O thread.
        self._connections: set[_Connection] = set()
        self._refusing: set[_Connection] = set()
        self._per_client: dict[str, int] = {}
        self._next_sweep = math.inf
        self._stop_deadline = math.inf
        self._accept_paused_until = 0.0
        self._chunk = memoryview(bytearray(_READ_CHUNK))

    def start(self) -> int:
        """Bind and start serving; returns the bound port (useful with port 0)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.requested_port))
        listener.listen(1024)
        listener.setblocking(False)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self.max_connections = _fit_to_fd_limit(self.max_connections)
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        for index in range(self.thread_count):
            worker = threading.Thread(
                target=self._work, args=(_Worker(),), name=f"http-worker-{index}", daemon=True
            )
            worker.start()
            self._workers.append(worker)
        self._io_thread = threading.Thread(target=self._io_loop, name="http-io", daemon=True)
        self._io_thread.start()
        return self.port

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close every connection that is idle or has not
        delivered a complete request, let those being answered finish (with
        ``Connection: close``), then return; whatever is still running after
        ``timeout_s`` is abandoned."""
        deadline = time.monotonic() + timeout_s
        self._stop_deadline = deadline
        self.stopping = True
        self._wake()
        if self._io_thread is not None:
            self._io_thread.join(max(0.0, deadline - time.monotonic()))
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    @property
    def accepting(self) -> bool:
        """False once the I/O loop has died: the watchdog's health signal."""
        return self._io_thread is not None and self._io_thread.is_alive()

    @property
    def open_connections(self) -> int:
        """Connections counted against the limits (refused ones are not)."""
        return len(self._connections)

    # worker threads ----------------------------------------------------------

    def _work(self, worker: _Worker) -> None:
        try:
            self._work_on(worker)
        finally:
            worker.close()

    def _work_on(self, worker: _Worker) -> None:
        while True:
            connection = self._ready.get()
            if connection is None:
                return
            try:
                connection.serve(worker)
            except OSError as exc:
                log.debug("http: connection ended: %s", exc)
                connection.verdict = _CLOSE
            except BaseException:
                log.exception("http: connection failed")
                connection.verdict = _CLOSE
            self._hand_back(connection)

    def _hand_back(self, connection: _Connection) -> None:
        """A worker returns ``connection`` (with its verdict) to the I/O thread."""
        try:
            connection.sock.setblocking(False)
        except OSError:
            connection.verdict = _CLOSE
        with self._lock:
            if not self._io_done:
                self._returned.append(connection)
                self._wake()
                return
        connection.sock.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # full (a wake-up is already pending) or closed (stopped)

    def _await_request(self, sock: socket.socket, worker: _Worker) -> bool:
        """A worker's linger: True once ``sock`` has bytes (or was closed)
        within ``linger_s``; False at the timeout, or at once when the I/O
        thread queues a connection for a worker meanwhile (it nudges one
        lingering worker), so lingering never delays queued work."""
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        poller.register(worker.nudge_r.fileno(), select.POLLIN)
        with self._lock:
            self._lingering.add(worker)
        try:
            # Re-checked after joining the lingering set: the I/O thread queues
            # and then looks for a lingerer, so one of the two sees the other.
            if not self._ready.empty():
                return False
            events = poller.poll(self.linger_s * 1000)
        finally:
            with self._lock:
                self._lingering.discard(worker)
        fd = sock.fileno()
        readable = False
        for event_fd, _ in events:
            if event_fd == fd:
                readable = True
            else:
                worker.clear_nudges()
        return readable

    def _nudge_lingering(self, everyone: bool = False) -> None:
        if not self._lingering:
            return
        with self._lock:
            if everyone:
                chosen = list(self._lingering)
                self._lingering.clear()
            else:
                chosen = [self._lingering.pop()] if self._lingering else []
        for worker in chosen:
            worker.nudge()

    # the I/O thread ------------------------------------------------------------

    def _io_loop(self) -> None:
        selector = self._selector
        assert selector is not None
        try:
            while not (self.stopping and self._stopped()):
                timeout = None
                if self._next_sweep < math.inf:
                    timeout = max(0.0, self._next_sweep - time.monotonic())
                for key, mask in selector.select(timeout):
                    if key.data is _LISTENER:
                        self._accept()
                    elif key.data is _WAKE:
                        self._drain_wake()
                    else:
                        self._on_ready(key.data, mask)
                while self._returned:
                    self._take_back(self._returned.popleft())
                if self.stopping:
                    self._close_unanswered()
                if time.monotonic() >= self._next_sweep:
                    self._sweep()
        except Exception:
            log.exception("http: I/O loop failed")
        finally:
            self._shut_down()

    def _stopped(self) -> bool:
        busy = any(c.state in (_WORKING, _WRITING) for c in self._connections)
        return not busy or time.monotonic() >= self._stop_deadline

    def _shut_down(self) -> None:
        with self._lock:
            self._io_done = True
        for connection in [*self._connections, *self._refusing]:
            if connection.state == _WORKING:
                # Its worker closes it; shutting it down makes any wait end now.
                try:
                    connection.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:
                connection.sock.close()
        self._connections.clear()
        self._refusing.clear()
        while self._returned:
            self._returned.popleft().sock.close()
        self._close_listener()
        for _ in self._workers:
            self._ready.put(None)
        if self._selector is not None:
            self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _close_listener(self) -> None:
        if self._listener is None:
            return
        if self._accept_paused_until == 0.0:
            try:
                self._selector.unregister(self._listener)
            except (KeyError, ValueError):
                pass
        self._listener.close()
        self._listener = None

    def _close_unanswered(self) -> None:
        """Stopping: no new connections, and none waiting for (the rest of) a
        request; those being answered finish."""
        self._nudge_lingering(everyone=True)
        self._close_listener()
        for connection in [*self._connections, *self._refusing]:
            if connection.state in (_READING, _DRAINING):
                self._close(connection)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("http: cannot accept connections for now: %s", exc.strerror)
                    self._selector.unregister(self._listener)
                    self._accept_paused_until = time.monotonic() + 0.1
                    self._schedule(self._accept_paused_until)
                    return
                continue  # the client went away before we took it
            self._admit(sock, str(address[0]) if address else "")

    def _admit(self, sock: socket.socket, peer: str) -> None:
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            sock.close()
            return
        if len(self._connections) >= self.max_connections:
            self._refuse(
                sock, peer, f"server busy: {self.max_connections} connections already open"
            )
            return
        per_client = self._per_client.get(peer, 0)
        if per_client >= self.max_connections_per_client:
            self._refuse(
                sock,
                peer,
                f"server busy: {self.max_connections_per_client} connections already open "
                f"from '{peer}' (--http-max-connections-per-client)",
            )
            return
        connection = _Connection(self, sock, peer)
        self._connections.add(connection)
        self._per_client[peer] = per_client + 1
        connection.idle_deadline = time.monotonic() + self.idle_timeout_s
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.idle_deadline)

    def _refuse(self, sock: socket.socket, peer: str, message: str) -> None:
        """A 503 the client can read: sent at once (a new socket's buffer takes
        it whole), then the write side shut and what the client sends discarded
        until it closes or ``_DRAIN_S`` passes, so its request does not meet a
        closed socket, whose reset would discard the 503 unread."""
        if len(self._refusing) >= _MAX_REFUSING:
            sock.close()
            return
        response = json_error_response(HTTPStatus.SERVICE_UNAVAILABLE, message)
        data = _head(response, len(response.body[0]), keep_alive=False) + response.body[0]
        try:
            sent = sock.send(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if sent < len(data):
            sock.close()
            return
        connection = _Connection(self, sock, peer)
        connection.state = _DRAINING
        connection.drain_deadline = time.monotonic() + _DRAIN_S
        self._refusing.add(connection)
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.drain_deadline)

    def _on_ready(self, connection: _Connection, mask: int) -> None:
        if connection.state == _READING:
            self._read(connection)
        elif connection.state == _WRITING:
            self._write(connection)
        elif connection.state == _DRAINING:
            self._discard(connection)

    def _read(self, connection: _Connection) -> None:
        try:
            for _ in range(16):
                count = connection.receive(self._chunk)
                if count == 0:
                    self._close(connection)
                    return
                if connection.has_work:
                    break
        except BlockingIOError:
            pass
        except OSError as exc:
            log.debug("http: connection ended: %s", exc)
            self._close(connection)
            return
        if connection.has_work:
            self._dispatch(connection)
            return
        try:
            connection.send_continue()
        except OSError:
            self._close(connection)
            return
        self._schedule(connection.deadline())

    def _dispatch(self, connection: _Connection) -> None:
        """Complete requests go to a worker; a refusal with nothing before it
        is written from here."""
        if connection.completed:
            self._watch(connection, 0)
            connection.state = _WORKING
            self._ready.put(connection)
            self._nudge_lingering()
            return
        connection.queue_refusal()
        self._writing(connection)

    def _writing(self, connection: _Connection) -> None:
        connection.state = _WRITING
        self._watch(connection, selectors.EVENT_WRITE)
        self._write(connection)

    def _write(self, connection: _Connection) -> None:
        try:
            done = connection.write_some()
        except OSError as exc:
            log.debug("http: connection ended while writing: %s", exc)
            self._close(connection)
            return
        if not done:
            self._schedule(connection.send_deadline)
            return
        if connection.close_after:
            self._start_drain(connection)
        elif connection.has_work:
            self._dispatch(connection)
        else:
            self._reading(connection)

    def _reading(self, connection: _Connection) -> None:
        if self.stopping:
            self._close(connection)
            return
        connection.state = _READING
        if connection.idle:
            connection.idle_deadline = time.monotonic() + self.idle_timeout_s
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.deadline())

    def _start_drain(self, connection: _Connection) -> None:
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(connection)
            return
        if self.stopping:
            self._close(connection)
            return
        connection.state = _DRAINING
        connection.drain_deadline = time.monotonic() + _DRAIN_S
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.drain_deadline)

    def _discard(self, connection: _Connection) -> None:
        try:
            for _ in range(16):
                if connection.sock.recv_into(self._chunk) == 0:
                    break
            else:
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._close(connection)

    def _take_back(self, connection: _Connection) -> None:
        verdict = connection.verdict
        if verdict == _CLOSE:
            self._close(connection)
        elif verdict == _DRAINING:
            self._start_drain(connection)
        elif verdict == _WRITING:
            self._writing(connection)
        elif connection.has_work:
            self._dispatch(connection)
        else:
            self._reading(connection)

    def _sweep(self) -> None:
        """Enforce every deadline that has passed; find the next one."""
        now = time.monotonic()
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            if self._listener is not None:
                self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)
        next_due = self._accept_paused_until or math.inf
        for connection in [*self._connections, *self._refusing]:
            deadline = connection.deadline()
            if deadline <= now:
                self._expire(connection)
                deadline = connection.deadline()
            next_due = min(next_due, deadline)
        self._next_sweep = max(next_due, now + _SWEEP_GRANULARITY_S)

    def _expire(self, connection: _Connection) -> None:
        if connection.state != _READING or connection.idle:
            log.debug("http: closing a %s connection at its deadline", connection.state)
            self._close(connection)
            return
        connection.queue_timeout()
        self._writing(connection)

    def _schedule(self, deadline: float) -> None:
        self._next_sweep = min(self._next_sweep, deadline)

    def _watch(self, connection: _Connection, events: int) -> None:
        if connection.events == events:
            return
        if connection.events == 0:
            self._selector.register(connection.sock, events, connection)
        elif events == 0:
            self._selector.unregister(connection.sock)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

    def _close(self, connection: _Connection) -> None:
        if connection.events:
            try:
                self._selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
            connection.events = 0
        connection.sock.close()
        connection.state = _CLOSE
        if connection in self._refusing:
            self._refusing.discard(connection)
            return
        if connection in self._connections:
            self._connections.discard(connection)
            left = self._per_client.get(connection.peer, 1) - 1
            if left > 0:
                self._per_client[connection.peer] = left
            else:
                self._per_client.pop(connection.peer, None)


def _fit_to_fd_limit(max_connections: int) -> int:
    """Raise the soft open-files limit to what ``max_connections`` needs (within
    the hard limit, as systemd expects services to do); if it cannot be, serve
    fewer connections rather than fail ``accept`` with EMFILE."""
    need = max_connections + _MAX_REFUSING + _FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return max_connections
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    except (ValueError, OSError):
        pass
    if soft >= need:
        return max_connections
    fitted = max(1, soft - _MAX_REFUSING - _FD_RESERVE)
    log.warning(
        "http: the open-files limit (%d) allows %d connections, not the %d configured "
        "(http_max_connections)",
        soft,
        fitted,
        max_connections,
    )
    return fitted


class _Worker:
    """What one worker thread owns: its read buffer, and the socket pair through
    which the I/O thread cuts its linger short."""

    def __init__(self) -> None:
        self.chunk = memoryview(bytearray(_READ_CHUNK))
        self.nudge_r, self.nudge_w = socket.socketpair()
        self.nudge_r.setblocking(False)
        self.nudge_w.setblocking(False)

    def nudge(self) -> None:
        try:
            self.nudge_w.send(b"\0")
        except OSError:
            pass  # a nudge is already pending, or the worker has gone

    def clear_nudges(self) -> None:
        try:
            while self.nudge_r.recv(64):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.nudge_r.close()
        self.nudge_w.close()


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


class _Connection:
    """One client connection. Owned by the I/O thread, or by the one worker it
    was handed to (``state`` says which); never by two threads at once."""

    def __init__(self, server: HttpServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.state = _READING
        self.events = 0
        """The selector events registered; 0 when not registered."""
        self.verdict = _READING
        """What a worker asks the I/O thread to do next with the connection."""
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
        if self.state == _READING:
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
        if self.state == _WRITING:
            return self.send_deadline
        if self.state == _DRAINING:
            return self.drain_deadline
        return math.inf

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
            message.chunks = _ChunkedBody(self.server.body_budget)
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
        counted = size >= _UNCOUNTED_BODY_BYTES
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

    def serve(self, worker: _Worker) -> None:
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
                    self.verdict = _WRITING
                    return
                if not keep_alive:
                    self.verdict = _DRAINING
                    return
            if self._refusal is not None:
                self.queue_refusal()
                self._push()
                self.verdict = _WRITING if self._outgoing else _DRAINING
                return
            if not self._linger(worker):
                return

    def _linger(self, worker: _Worker) -> bool:
        """Wait (up to ``linger_s``, unless nudged) for the next request, then
        read it while it keeps coming, within ``_FAST_READ_BUDGET_S``. True
        when there is something to answer; else False with ``verdict`` set."""
        server = self.server
        self.verdict = _READING
        if server.linger_s <= 0 or server.stopping or not server._ready.empty():
            return False
        if not server._await_request(self.sock, worker):
            return False
        budget_end = time.monotonic() + _FAST_READ_BUDGET_S
        while True:
            self.sock.settimeout(max(0.001, budget_end - time.monotonic()))
            try:
                count = self.receive(worker.chunk)
            except TimeoutError:
                return False
            if count == 0:
                self.verdict = _CLOSE
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
        self._send(response, keep_alive, head_only=request.method == "HEAD")
        return keep_alive

    def _send(self, response: HttpResponse, keep_alive: bool, head_only: bool = False) -> None:
        """Send ``response``; for HEAD, its headers only, with the length a GET would get."""
        length = sum(_nbytes(b) for b in response.body)
        head = _head(response, length, keep_alive)
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
                sent = self.sock.sendmsg(views[:_IOV_MAX])
            except TimeoutError:
                break
            _advance(views, sent)
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
        self._outgoing = [memoryview(b).cast("B") for b in buffers if _nbytes(b)]
        self.close_after = close_after

    def queue_refusal(self) -> None:
        refusal, self._refusal = self._refusal, None
        self.completed.clear()
        self._current = None
        self._queue([_head(refusal, len(refusal.body[0]), keep_alive=False), *refusal.body], True)
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
                sent = self.sock.sendmsg(views[:_IOV_MAX])
            except BlockingIOError:
                return False
            _advance(views, sent)
        return not views


def _advance(views: list[memoryview], sent: int) -> None:
    while sent:
        first = views[0]
        if sent >= len(first):
            sent -= len(first)
            views.pop(0)
        else:
            views[0] = first[sent:]
            sent = 0


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
