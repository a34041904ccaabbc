"""Issue 9's connection-exhaustion proof: legitimate new clients are served
while 128 slow sockets are held open.

The slow sockets are the three kinds that used to lock everyone out, in turn:

* ``headers``: a request line and part of a header, then one more header byte
  every ``TRICKLE_S`` (slowloris);
* ``idle``: a keep-alive connection that had one request answered and then
  says nothing;
* ``body``: an infer request's headers announcing a 1 MB body, then one body
  byte every ``TRICKLE_S``.

A holder thread keeps all of them open for the whole case: it trickles, and
reopens any socket the server closes (a real attacker would), counting what
the server sent first (a 408 or 503 it could read, or nothing).

Meanwhile legitimate clients, ``CONCURRENCY`` threads on 127.0.0.1 (paced by
``PACE_S``), each open a new connection, send one ``add_sub`` infer request (tritonclient's bytes),
and must read a complete 200 within ``DEADLINE_S``; the share that did is the
figure, target >= 99%.

Two cases: ``spread``, the 128 sockets from 8 loopback addresses (127.0.0.2-9,
16 each, within the per-client cap), which tests the design (an idle or
half-sent connection must not hold a worker); and ``one address``, all 128
from 127.0.0.2, past the per-client cap of waiting connections (64): the ones
past it are closed after their probation (a second), with a 503 the holder
must be able to read when a request was under way, and the holder reopens
them. Linux only: it binds 127.0.0.x source addresses. Run alone with
``python bench/run.py --only slowloris``.
"""

from __future__ import annotations

import select
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable

import numpy as np
import tritonclient.http as httpclient

from bench.workload import Workload

SLOW_SOCKETS = 128
KINDS = ("headers", "idle", "body")
TRICKLE_S = 1.0
DEADLINE_S = 2.0
CONCURRENCY = 4
TARGET_SHARE = 0.99
PACE_S = 0.005
"""Each client thread starts at most one new client per this many seconds:
800 new connections a second in all, so a case's client ports (each left in
TIME_WAIT) stay well inside the ephemeral range."""


class SlowSockets:
    """``count`` slow sockets to ``port``, their source addresses taken in turn
    from ``sources``; trickled and reopened by one thread until ``close``."""

    def __init__(self, port: int, count: int, sources: list[str]) -> None:
        self.port = port
        self.sources = sources
        self.first_answers: Counter[str] = Counter()
        """What the server sent on a slow socket it closed: a status line's
        code, or 'nothing' (closed or reset with no answer)."""
        self.reopened = 0
        self.failure: BaseException | None = None
        self._sockets: list[tuple[str, str, socket.socket | None]] = [
            (KINDS[i % len(KINDS)], sources[i % len(sources)], None) for i in range(count)
        ]
        self._stop = threading.Event()
        for index in range(count):
            self._open(index)
        self._thread = threading.Thread(target=self._hold, name="bench-slowloris", daemon=True)
        self._thread.start()

    def _open(self, index: int) -> None:
        kind, source, _ = self._sockets[index]
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(DEADLINE_S)
            sock.bind((source, 0))
            sock.connect(("127.0.0.1", self.port))
            if kind == "headers":
                sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: bench\r\nX-Slow: ")
            elif kind == "body":
                sock.sendall(
                    b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: bench\r\n"
                    b"Content-Length: 1000000\r\n\r\n{"
                )
            else:
                sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: bench\r\n\r\n")
                status = _read_status(sock)
                if status != "200":
                    self.first_answers[status] += 1
                    raise ConnectionError(f"idle socket's first request answered {status}")
            sock.setblocking(False)
        except OSError:
            sock.close()
            sock = None
        self._sockets[index] = (kind, source, sock)

    def _hold(self) -> None:
        """Trickle a byte on each slow socket every TRICKLE_S and reopen any the
        server closed, until stopped. A crash here would leave the case measuring
        sockets that no longer behave as slow clients, so ``close`` raises it."""
        try:
            self._trickle()
        except BaseException as exc:
            self.failure = exc
            raise

    def _trickle(self) -> None:
        while not self._stop.wait(TRICKLE_S):
            for index, (kind, _source, sock) in enumerate(self._sockets):
                if sock is not None and not _readable(sock):
                    try:
                        if kind != "idle":
                            sock.send(b"a")
                        continue
                    except OSError:
                        pass
                if sock is not None:
                    self.first_answers[_first_answer(sock)] += 1
                    sock.close()
                self.reopened += 1
                self._open(index)

    @property
    def held(self) -> int:
        return sum(1 for _, _, sock in self._sockets if sock is not None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(TRICKLE_S + 10 * DEADLINE_S)
        for _, _, sock in self._sockets:
            if sock is not None:
                sock.close()
        if self.failure is not None:
            raise RuntimeError(f"the slow sockets' holder failed: {self.failure!r}")


def _read_status(sock: socket.socket) -> str:
    """The status code of one small response, which is read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed before answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed mid-answer")
        rest += chunk
    return head.split(b" ", 2)[1].decode("latin-1")


def _first_answer(sock: socket.socket) -> str:
    try:
        data = sock.recv(4096)
    except OSError:
        return "nothing"
    if data.startswith(b"HTTP/1.1 "):
        return data.split(b" ", 2)[1].decode("latin-1")
    return "nothing"


class NewClients:
    """New connections from 127.0.0.1, one ``add_sub`` infer request each."""

    def __init__(self, port: int, workload: Workload) -> None:
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            workload.triton_inputs(), outputs=workload.triton_outputs()
        )
        head = (
            f"POST /v2/models/{workload.name}/infer HTTP/1.1\r\nHost: bench\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Inference-Header-Content-Length: {json_size}\r\n\r\n"
        ).encode("latin-1")
        self.port = port
        self.request = head + body

    def one(self) -> tuple[str, float]:
        """('served', seconds) or (what went wrong, seconds)."""
        started = time.perf_counter()
        deadline = started + DEADLINE_S
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=DEADLINE_S) as sock:
                sock.sendall(self.request)
                sock.settimeout(max(0.001, deadline - time.perf_counter()))
                status = _read_status(sock)
        except TimeoutError:
            return "timeout", time.perf_counter() - started
        except OSError as exc:
            return type(exc).__name__, time.perf_counter() - started
        elapsed = time.perf_counter() - started
        if elapsed > DEADLINE_S:
            return "timeout", elapsed
        return ("served" if status == "200" else status), elapsed

    def run(self, duration_s: float) -> tuple[Counter[str], list[float]]:
        """``CONCURRENCY`` closed loops of new clients for ``duration_s``."""
        outcomes: Counter[str] = Counter()
        latencies: list[float] = []
        lock = threading.Lock()
        end = time.monotonic() + duration_s

        def loop() -> None:
            pace = threading.Event()
            next_start = time.monotonic()
            while next_start < end:
                outcome, elapsed = self.one()
                with lock:
                    outcomes[outcome] += 1
                    if outcome == "served":
                        latencies.append(elapsed)
                next_start += PACE_S
                pace.wait(max(0.0, next_start - time.monotonic()))

        threads = [
            threading.Thread(target=loop, name=f"bench-new-client-{i}", daemon=True)
            for i in range(CONCURRENCY)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(duration_s + 10 * DEADLINE_S)
        return outcomes, latencies


def measure(
    url: str, workload: Workload, duration_s: float, log: Callable[[str], None] = print
) -> tuple[dict, list[tuple[str, bool, str, float]]]:
    """Undisturbed new clients first (for their latency), then each case.
    Returns the figures for results.json and the targets (name, passed, text,
    ratio)."""
    port = int(url.rsplit(":", 1)[1])
    clients = NewClients(port, workload)
    figures: dict = {}
    targets = []
    outcomes, latencies = clients.run(min(duration_s, 3.0))
    figures["no slow sockets"] = _summary(outcomes, latencies, None)
    log(_line("no slow sockets", figures["no slow sockets"]))
    cases = {
        "spread": [f"127.0.0.{2 + i}" for i in range(8)],
        "one address": ["127.0.0.2"],
    }
    for case, sources in cases.items():
        slow = SlowSockets(port, SLOW_SOCKETS, sources)
        try:
            held_at_start = slow.held
            outcomes, latencies = clients.run(duration_s)
            held_at_end = slow.held
        finally:
            slow.close()
        figure = _summary(outcomes, latencies, slow)
        figure["slow_sockets_held"] = [held_at_start, held_at_end]
        figures[case] = figure
        log(_line(case, figure))
        share = figure["served_share"]
        targets.append(
            (
                f"slowloris ({case}): new clients served >= 99% while {SLOW_SOCKETS} "
                "slow sockets are held",
                share >= TARGET_SHARE,
                f"{figure['served']} of {figure['clients']} served within {DEADLINE_S:g} s "
                f"({100 * share:.2f}%); slow sockets open {held_at_start} at start, "
                f"{held_at_end} at end",
                round(share / TARGET_SHARE, 3),
            )
        )
    return figures, targets


def _summary(outcomes: Counter[str], latencies: list[float], slow: SlowSockets | None) -> dict:
    total = sum(outcomes.values())
    served = outcomes.get("served", 0)
    figure = {
        "clients": total,
        "served": served,
        "served_share": served / total if total else 0.0,
        "failures": {k: v for k, v in outcomes.items() if k != "served"},
        "p50_ms": round(statistics.median(latencies) * 1e3, 2) if latencies else None,
        "p99_ms": round(float(np.percentile(latencies, 99)) * 1e3, 2) if latencies else None,
    }
    if slow is not None:
        figure["slow_sockets_reopened"] = slow.reopened
        figure["server_first_answer_on_closed_slow_sockets"] = dict(slow.first_answers)
    return figure


def _line(case: str, figure: dict) -> str:
    text = (
        f"  {case:<16} new clients {figure['served']}/{figure['clients']} served "
        f"({100 * figure['served_share']:.2f}%), p50 {figure['p50_ms']} ms, "
        f"p99 {figure['p99_ms']} ms"
    )
    if figure["failures"]:
        text += f", failures {figure['failures']}"
    if "slow_sockets_held" in figure:
        text += (
            f"; slow sockets held {figure['slow_sockets_held']}, reopened "
            f"{figure['slow_sockets_reopened']}, server's answer when it closed one: "
            f"{figure['server_first_answer_on_closed_slow_sockets']}"
        )
    return text


def _readable(sock: socket.socket) -> bool:
    """Whether the server sent or closed something; poll() because the bench's
    descriptors run past select()'s 1024 after the earlier cases."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))
