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
``sendmsg`` from the output arrays, then hands the connection back. What a
connection does on each side lives in ``connection`` (its parsing in
``request_reader``); this module owns the listener, the I/O loop, the workers
and the limits.

Why workers write and then wait briefly: measured on the target class of
machine (``bench/RESULTS.md``), handing each request from an event loop to a
worker thread and back cost more than the whole request budget for small
tensors. So after answering, a worker waits up to ``linger_s`` for the client's
next request on that connection and, if it comes, reads and answers it itself:
a keep-alive client sending back to back crosses no thread boundary, as with
a thread per connection. Lingering never delays other work: it is skipped
while connections are queued for a worker, and a lingering worker is nudged
(through its own socket pair) the moment one is queued; and the next request
must arrive in full within a short read budget, or the I/O thread takes over
its reading. A response the client does not take promptly (a slow or absent
reader) is finished by the I/O thread, not the worker.

Limits keep it safe on an appliance, each with a total deadline rather than a
per-read one, since a byte every few seconds would reset a per-read timer:

- at most ``max_connections`` connections; the next one gets a 503 that the
  client can read (the server shuts its side and discards what the client sends,
  for up to ``_DRAIN_S`` and one request's worth of bytes, before closing, so
  the 503 is not lost to a reset);
- one address (loopback included) may have any number of connections being
  answered, but only ``max_connections_per_client`` *waiting* on it (idle, or
  a request still arriving: what slow clients hold). Past that, a connection
  is on probation: unless it delivers a request within ``probation_s`` (or its
  address falls back under the cap), it is closed, with a readable 503 if a
  request was under way; and while the server is full, the oldest one on
  probation makes room for a client within its cap. So a benchmarking host or
  a gateway can keep hundreds of busy keep-alive connections, perf_analyzer's
  burst of new ones included, while one address holding connections that do
  nothing can neither keep more than its share nor lock others out;
- a request's line and headers must arrive within ``read_timeout_s`` of its
  first byte; a body within ``read_timeout_s`` plus one second per
  ``min_transfer_bytes_per_s`` bytes received (a large upload over a slow link
  is not cut off, a trickle is); else 408 and close;
- a response must be taken within ``read_timeout_s`` plus one second per
  ``min_transfer_bytes_per_s`` bytes left when the worker gave it up, else the
  connection is closed;
- idle keep-alive connections are closed after ``idle_timeout_s``;
- bodies held at once are capped at ``max_body_bytes_in_flight`` (503 before
  a body is read; see ``body_budget``);
- bodies over ``max_request_bytes`` (413), URLs over 65,535 bytes (414) and
  request heads over 256 KiB (431) are refused as ``request_reader`` parses
  them, each after the requests pipelined before it are answered.
"""

from __future__ import annotations

import collections
import errno
import logging
import math
import queue
import resource
import select
import selectors
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus

from edgebox.protocol.http.body_budget import BodyBudget, default_body_bytes_in_flight
from edgebox.protocol.http.connection import (
    CLOSE,
    DRAINING,
    READING,
    WORKING,
    WRITING,
    Connection,
)
from edgebox.protocol.http.messages import Handler, json_error_response, response_head
from edgebox.protocol.http.request_reader import MAX_HEAD_BYTES
from edgebox.protocol.http.worker import READ_CHUNK_BYTES, Worker

log = logging.getLogger(__name__)

_LINGER_S = 0.05
"""Long enough for a client on a busy two-core box, or a camera at 20 fps, to
send its next request; free otherwise, since a queued request cuts it short."""
_DRAIN_S = 2.0
_PROBATION_S = 1.0
"""How long a connection past its address's cap of waiting connections has to
deliver a request: ample for a client that sends right after connecting (on a
busy two-core box too), a short hold for one that does not."""
_MAX_REFUSING = 128
"""Refused connections kept open at once to deliver their 503; past this a
refused connection is closed at once (a flood, not a client to inform)."""
_FD_RESERVE = 256
"""File descriptors left for everything but connections: models, logs, pipes."""
_SWEEP_GRANULARITY_S = 0.01
_ACCEPTS_PER_WAKE = 64

_LISTENER = object()
_WAKE = object()


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
        probation_s: float = _PROBATION_S,
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
        self.probation_s = probation_s
        self.align_body_at = align_body_at
        self.port = 0
        self.stopping = False
        self._listener: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._io_thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        self._ready: queue.SimpleQueue[Connection | None] = queue.SimpleQueue()
        """Connections with a complete request, waiting for a worker; each is
        queued at most once, so the queue holds at most ``max_connections``."""
        self._returned: collections.deque[Connection] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        """Guards ``_io_done`` against hand-backs and ``_lingering``."""
        self._io_done = False
        self._lingering: set[Worker] = set()
        # The rest belongs to the I/O thread.
        self._connections: set[Connection] = set()
        self._refusing: set[Connection] = set()
        self._waiting: dict[str, int] = {}
        """Per address, its connections in READING (see ``_enter``)."""
        self._probation: dict[Connection, None] = {}
        """Connections on probation, oldest first."""
        self._next_sweep = math.inf
        self._stop_deadline = math.inf
        self._accept_paused_until = 0.0
        self._chunk = memoryview(bytearray(READ_CHUNK_BYTES))

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
                target=self._work, args=(Worker(),), name=f"http-worker-{index}", daemon=True
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
        listener = self._listener
        if listener is not None:
            # Refuse new connections now, before any open one is closed: a
            # client that sees its connection end must not reconnect into a
            # listener that is still there.
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
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

    def _work(self, worker: Worker) -> None:
        try:
            self._work_on(worker)
        finally:
            worker.close()

    def _work_on(self, worker: Worker) -> None:
        while True:
            connection = self._ready.get()
            if connection is None:
                return
            try:
                connection.serve(worker)
            except OSError as exc:
                log.debug("http: connection ended: %s", exc)
                connection.verdict = CLOSE
            except BaseException:
                log.exception("http: connection failed")
                connection.verdict = CLOSE
            self._hand_back(connection)

    def _hand_back(self, connection: Connection) -> None:
        """A worker returns ``connection`` (with its verdict) to the I/O thread."""
        try:
            connection.sock.setblocking(False)
        except OSError:
            connection.verdict = CLOSE
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

    def await_request(self, sock: socket.socket, worker: Worker) -> bool:
        """A worker's linger, called from ``Connection`` on the worker's
        thread: True once ``sock`` has bytes (or was closed) within
        ``linger_s``; False at the timeout, or at once when lingering is off,
        the server is stopping, a connection already waits for a worker, or the
        I/O thread queues one meanwhile (it nudges one lingering worker), so
        lingering never delays queued work."""
        if self.linger_s <= 0 or self.stopping or not self._ready.empty():
            return False
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
        busy = any(c.state in (WORKING, WRITING) for c in self._connections)
        return not busy or time.monotonic() >= self._stop_deadline

    def _shut_down(self) -> None:
        with self._lock:
            self._io_done = True
        for connection in [*self._connections, *self._refusing]:
            if connection.state == WORKING:
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
        self._close_listener()
        self._nudge_lingering(everyone=True)
        for connection in [*self._connections, *self._refusing]:
            if connection.state in (READING, DRAINING):
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
        if len(self._connections) >= self.max_connections and not self._make_room(peer):
            self._refuse(
                sock, peer, f"server busy: {self.max_connections} connections already open"
            )
            return
        connection = Connection(self, sock, peer)
        self._connections.add(connection)
        connection.idle_deadline = time.monotonic() + self.idle_timeout_s
        self._enter(connection, READING)
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.idle_deadline)

    def _make_room(self, peer: str) -> bool:
        """The server is full: for a client within its cap of waiting
        connections, evict the oldest connection on probation."""
        if self._waiting.get(peer, 0) >= self.max_connections_per_client or not self._probation:
            return False
        self._evict(next(iter(self._probation)))
        return True

    def _enter(self, connection: Connection, state: str) -> None:
        """Every state change of a counted connection goes through here, so that
        each address's count of waiting (READING) connections stays exact; one
        that starts waiting past its address's cap is put on probation."""
        connection.state = state
        waiting = state == READING
        if waiting == connection.waiting:
            return
        connection.waiting = waiting
        peer = connection.peer
        if waiting:
            count = self._waiting.get(peer, 0) + 1
            self._waiting[peer] = count
            if count > self.max_connections_per_client:
                connection.probation_deadline = time.monotonic() + self.probation_s
                self._probation[connection] = None
                self._schedule(connection.probation_deadline)
            return
        left = self._waiting.get(peer, 1) - 1
        if left > 0:
            self._waiting[peer] = left
        else:
            self._waiting.pop(peer, None)
        self._end_probation(connection)

    def _end_probation(self, connection: Connection) -> None:
        connection.probation_deadline = 0.0
        self._probation.pop(connection, None)

    def _evict(self, connection: Connection) -> None:
        """Out of the count at once: an idle connection is closed (as at its idle
        deadline); one with a request under way gets a readable 503. So does one
        whose first bytes have arrived but are not read yet (this thread met the
        newcomer first): closing a socket with unread bytes resets it, and the
        client would read no answer at all."""
        if connection.idle and not _has_unread_bytes(connection.sock):
            self._close(connection)
            return
        self._forget(connection)
        self._refuse(
            connection.sock,
            connection.peer,
            f"server busy: {self.max_connections_per_client} connections already waiting "
            f"from '{connection.peer}' (--http-max-connections-per-client)",
        )

    def _refuse(self, sock: socket.socket, peer: str, message: str) -> None:
        """A 503 the client can read: sent at once (a new socket's buffer takes
        it whole), then the write side shut and what the client sends discarded
        until it closes or ``_DRAIN_S`` passes, so its request does not meet a
        closed socket, whose reset would discard the 503 unread."""
        if len(self._refusing) >= _MAX_REFUSING:
            sock.close()
            return
        response = json_error_response(HTTPStatus.SERVICE_UNAVAILABLE, message)
        data = response_head(response, len(response.body[0]), keep_alive=False) + response.body[0]
        try:
            sent = sock.send(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if sent < len(data):
            sock.close()
            return
        connection = Connection(self, sock, peer)
        connection.state = DRAINING
        self._refusing.add(connection)
        self._drain(connection)

    def _on_ready(self, connection: Connection, mask: int) -> None:
        if connection.state == READING:
            self._read(connection)
        elif connection.state == WRITING:
            self._write(connection)
        elif connection.state == DRAINING:
            self._discard(connection)

    def _read(self, connection: Connection) -> None:
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

    def _dispatch(self, connection: Connection) -> None:
        """Complete requests go to a worker; a refusal with nothing before it
        is written from here."""
        if connection.completed:
            self._watch(connection, 0)
            self._enter(connection, WORKING)
            self._ready.put(connection)
            self._nudge_lingering()
            return
        connection.queue_refusal()
        self._writing(connection)

    def _writing(self, connection: Connection) -> None:
        self._enter(connection, WRITING)
        self._watch(connection, selectors.EVENT_WRITE)
        self._write(connection)

    def _write(self, connection: Connection) -> None:
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

    def _reading(self, connection: Connection) -> None:
        if self.stopping:
            self._close(connection)
            return
        if connection.idle:
            connection.idle_deadline = time.monotonic() + self.idle_timeout_s
        self._enter(connection, READING)
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.deadline())

    def _start_drain(self, connection: Connection) -> None:
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(connection)
            return
        if self.stopping:
            self._close(connection)
            return
        self._enter(connection, DRAINING)
        self._drain(connection)

    def _drain(self, connection: Connection) -> None:
        """Discard what the client sends after its last answer until it closes,
        for up to ``_DRAIN_S`` and as many bytes as one request may have (the
        most a client can send before it reads): enough for it to reach its
        answer, too little for a client that never stops sending to hold on."""
        connection.drain_deadline = time.monotonic() + _DRAIN_S
        connection.drain_bytes_left = self.max_request_bytes + MAX_HEAD_BYTES
        self._watch(connection, selectors.EVENT_READ)
        self._schedule(connection.drain_deadline)

    def _discard(self, connection: Connection) -> None:
        try:
            for _ in range(16):
                count = connection.sock.recv_into(self._chunk)
                connection.drain_bytes_left -= count
                if count == 0 or connection.drain_bytes_left <= 0:
                    break
            else:
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._close(connection)

    def _take_back(self, connection: Connection) -> None:
        verdict = connection.verdict
        if verdict == CLOSE:
            self._close(connection)
        elif verdict == DRAINING:
            self._start_drain(connection)
        elif verdict == WRITING:
            self._writing(connection)
        elif connection.has_work:
            self._dispatch(connection)
        else:
            self._reading(connection)

    def _sweep(self) -> None:
        """Enforce every deadline that has passed; find the next one, counting
        those scheduled meanwhile (a connection closed with a 503 drains as a
        new entry the loop does not visit)."""
        now = time.monotonic()
        self._next_sweep = math.inf
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
        self._next_sweep = max(min(next_due, self._next_sweep), now + _SWEEP_GRANULARITY_S)

    def _expire(self, connection: Connection) -> None:
        if connection.state == READING and 0 < connection.probation_deadline <= time.monotonic():
            if self._waiting.get(connection.peer, 0) > self.max_connections_per_client:
                self._evict(connection)
            else:
                self._end_probation(connection)
            return
        if connection.state != READING or connection.idle:
            log.debug("http: closing a %s connection at its deadline", connection.state)
            self._close(connection)
            return
        connection.queue_timeout()
        self._writing(connection)

    def _schedule(self, deadline: float) -> None:
        self._next_sweep = min(self._next_sweep, deadline)

    def _watch(self, connection: Connection, events: int) -> None:
        if connection.events == events:
            return
        if connection.events == 0:
            self._selector.register(connection.sock, events, connection)
        elif events == 0:
            self._selector.unregister(connection.sock)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

    def _close(self, connection: Connection) -> None:
        self._forget(connection)
        connection.sock.close()

    def _forget(self, connection: Connection) -> None:
        """Stop watching and counting ``connection``; its socket stays open."""
        if connection.events:
            try:
                self._selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
            connection.events = 0
        if connection in self._refusing:
            connection.state = CLOSE
            self._refusing.discard(connection)
            return
        if connection in self._connections:
            self._enter(connection, CLOSE)
            self._connections.discard(connection)
        else:
            connection.state = CLOSE


def _has_unread_bytes(sock: socket.socket) -> bool:
    """Non-blocking: True when the client has sent bytes not read yet."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # BlockingIOError: nothing sent; any other: gone
        return False


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
