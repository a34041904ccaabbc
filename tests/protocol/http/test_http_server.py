"""HttpServer on its own (``http_server``): binding, stopping, connection limits,
deadlines and the worker pool, over raw sockets (and http.client) against a tiny
handler on 127.0.0.1, port 0. Every wait is bounded by a socket timeout or a
deadline."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import numpy as np
import pytest
from http_client import CLIENT_TIMEOUT_S, HOST, RawClient, http_request

from daemon_process import wait_for
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.server import HttpServer

# -- starting and stopping -----------------------------------------------------


def test_start_binds_port_zero_and_reports_the_port(serve, echo):
    server = serve(echo)
    assert server.port > 0
    connection = http.client.HTTPConnection(HOST, server.port, timeout=CLIENT_TIMEOUT_S)
    connection.request("GET", "/hello")
    assert connection.getresponse().status == 200
    connection.close()


def test_stop_finishes_in_flight_request_and_closes_idle_connections(serve, client_of):
    entered, release = threading.Event(), threading.Event()

    def handler(request: HttpRequest) -> HttpResponse:
        if request.path == "/block":
            entered.set()
            release.wait(10)
        return HttpResponse(200, [request.path.encode()])

    server = serve(handler, idle_timeout_s=30)
    idle = client_of(server)
    idle.send(http_request("GET", "/warm"))
    assert idle.read_response().body == b"/warm"
    busy = client_of(server)
    busy.send(http_request("GET", "/block"))
    assert entered.wait(CLIENT_TIMEOUT_S)

    stopper = threading.Thread(target=server.stop, kwargs={"timeout_s": 10})
    stopper.start()
    try:
        idle.assert_closed()
        assert stopper.is_alive(), "stop() returned while a request was in flight"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, server.port), timeout=CLIENT_TIMEOUT_S).close()
    finally:
        release.set()
    reply = busy.read_response()
    assert (reply.status, reply.body) == (200, b"/block")
    assert reply.headers["connection"] == "close"
    busy.assert_closed()
    stopper.join(CLIENT_TIMEOUT_S)
    assert not stopper.is_alive()


# -- connection limits (issue 9, item 4) ---------------------------------------


def test_connections_over_the_limit_get_503(serve, echo, client_of):
    server = serve(echo, max_connections=2)
    first, second = client_of(server), client_of(server)
    for client in (first, second):
        client.send(http_request())
        assert client.read_response().status == 200
    third = client_of(server)
    reply = third.read_response()
    assert reply.status == 503
    assert reply.headers["connection"] == "close"
    assert reply.json() == {"error": "server busy: 2 connections already open"}
    third.assert_closed()
    first.close()

    def a_new_connection_is_served() -> bool:
        client = RawClient(server.port)
        try:
            client.send(http_request("GET", "/again"))
            return client.read_response().status == 200
        except (OSError, EOFError):
            return False
        finally:
            client.close()

    wait_for(a_new_connection_is_served, 5, what="a slot to free up")


def test_one_address_keeps_hundreds_of_busy_keep_alive_connections(serve, echo, client_of):
    """perf_analyzer --concurrency-range 300 from one host: every connection
    opened at once, each sending at once, then again on the same connection."""
    server = serve(echo, probation_s=CLIENT_TIMEOUT_S)
    clients = []
    for index in range(300):
        client = client_of(server)
        client.send(http_request("GET", f"/first/{index}"))
        clients.append(client)
    for rounds in ("first", "again"):
        for index, client in enumerate(clients):
            reply = client.read_response()
            assert reply.status == 200, reply.body
            assert reply.json()["path"] == f"/{rounds}/{index}"
            if rounds == "first":
                client.send(http_request("GET", f"/again/{index}"))
    assert server.open_connections == 300


def test_a_connection_waiting_past_the_per_client_cap_gets_a_readable_503(serve, echo, client_of):
    server = serve(echo, max_connections_per_client=2, probation_s=0.3)
    slow = [client_of(server), client_of(server)]
    for client in slow:
        client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    sends_promptly = client_of(server)
    sends_promptly.send(http_request("GET", "/prompt"))
    assert sends_promptly.read_response().status == 200
    third = client_of(server)
    third.send(b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\nzz")
    started = time.monotonic()
    reply = third.read_response()
    assert time.monotonic() - started >= 0.2
    assert reply.status == 503
    assert reply.headers["connection"] == "close"
    assert reply.json() == {
        "error": "server busy: 2 connections already waiting from '127.0.0.1' "
        "(--http-max-connections-per-client)"
    }
    third.send(b"z" * 300_000)  # a broken pipe if not drained
    third.assert_closed()
    assert [s["path"] for s in echo.seen] == ["/prompt"]
    assert not any(client.readable(timeout_s=0) for client in slow)


def test_an_idle_connection_past_the_per_client_cap_is_closed_after_its_probation(
    serve, echo, client_of
):
    server = serve(echo, max_connections_per_client=1, probation_s=0.3, idle_timeout_s=30)
    clients = [client_of(server), client_of(server)]
    for client in clients:
        client.send(http_request())
        assert client.read_response().status == 200
    closed = wait_for(
        lambda: [c for c in clients if c.readable(timeout_s=0.05)], 5, what="a closed connection"
    )
    assert len(closed) == 1
    closed[0].assert_closed()
    kept = next(c for c in clients if c is not closed[0])
    kept.send(http_request("GET", "/kept"))
    assert kept.read_response().status == 200


def test_a_connection_closed_at_its_probation_is_not_held_past_its_drain(serve, echo, client_of):
    """The 503's drain deadline is kept even when nothing else is due sooner
    than the other connection's 30 s header deadline."""
    server = serve(echo, max_connections_per_client=1, probation_s=0.1, read_timeout_s=30)
    first, second = client_of(server), client_of(server)
    for client in (first, second):
        client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    assert second.read_response().status == 503

    def closed_for_good() -> bool:
        try:
            second.send(b"x")  # discarded while the server drains, refused after
        except OSError:
            return True
        return False

    wait_for(closed_for_good, CLIENT_TIMEOUT_S, what="the drain to end (2 s), not at 30 s")
    assert not first.readable(timeout_s=0)


def test_when_full_a_connection_on_probation_makes_room_for_a_client_within_its_cap(
    serve, echo, client_of
):
    server = serve(echo, max_connections=3, max_connections_per_client=1, probation_s=30)
    held = []
    for _ in range(3):
        client = client_of(server)
        client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        held.append(client)
    wait_for(lambda: server.open_connections == 3, 5, what="three connections")
    other = client_of(server, source="127.0.0.2")
    other.send(http_request("GET", "/other"))
    assert other.read_response().status == 200
    evicted = [c for c in held if c.readable(timeout_s=0.1)]
    assert evicted == [held[1]], "the oldest connection on probation makes room"
    assert evicted[0].read_response().json() == {
        "error": "server busy: 1 connections already waiting from '127.0.0.1' "
        "(--http-max-connections-per-client)"
    }
    one_more = client_of(server)
    assert one_more.read_response().json() == {"error": "server busy: 3 connections already open"}


def test_a_connection_evicted_before_its_bytes_are_read_still_reads_its_503(serve, echo, client_of):
    """The I/O thread may meet the newcomer before it reads what the connection
    on probation has just sent: that connection looks idle, but closing it with
    those bytes unread would reset it, and its client would read no answer.
    Here the I/O thread is held (in ``align_body_at``) while the newcomer
    connects and then the connection on probation sends, so the newcomer comes
    first (epoll reports sockets in the order they became ready)."""
    io_held, release = threading.Event(), threading.Event()

    def align_body_at(headers: dict[str, str]) -> int:
        if headers.get("x-hold-io-thread"):
            io_held.set()
            release.wait(CLIENT_TIMEOUT_S)
        return 0

    server = serve(
        echo,
        max_connections=3,
        max_connections_per_client=1,
        probation_s=30,
        align_body_at=align_body_at,
    )
    held = [client_of(server) for _ in range(3)]
    wait_for(lambda: server.open_connections == 3, 5, what="three connections")
    held[0].send(
        http_request("POST", "/hold", headers={"Content-Length": "1", "X-Hold-IO-Thread": "1"})
    )
    assert io_held.wait(CLIENT_TIMEOUT_S)
    try:
        other = client_of(server, source="127.0.0.2")
        held[1].send(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    finally:
        release.set()
    other.send(http_request("GET", "/other"))
    assert other.read_response().status == 200
    reply = held[1].read_response()
    assert reply.status == 503
    assert reply.json() == {
        "error": "server busy: 1 connections already waiting from '127.0.0.1' "
        "(--http-max-connections-per-client)"
    }
    held[1].assert_closed()
    held[0].send(b"x")
    assert held[0].read_response().json()["path"] == "/hold"


def test_connection_over_the_total_cap_reads_its_503_after_sending_a_body(serve, echo, client_of):
    server = serve(echo, max_connections=1)
    first = client_of(server)
    first.send(http_request())
    assert first.read_response().status == 200
    second = client_of(server)
    assert second.readable(timeout_s=CLIENT_TIMEOUT_S)  # refused before it sent anything
    second.send(http_request("POST", "/refused", b"z" * 8_000_000))  # more than buffers hold
    reply = second.read_response()
    assert reply.status == 503
    assert reply.json() == {"error": "server busy: 1 connections already open"}
    second.assert_closed()


def test_a_refused_client_that_never_stops_sending_is_closed_after_one_request_s_worth(
    serve, echo, client_of, monkeypatch
):
    """The drain after a 503 discards up to one request's worth of bytes (the
    most a client sends before it reads), not whatever comes for ``_DRAIN_S``;
    the drain's time is stretched here so that only its byte bound can end it."""
    monkeypatch.setattr("edgebox.protocol.http.server._DRAIN_S", 60.0)
    server = serve(echo, max_connections=1, max_request_bytes=1024)
    first = client_of(server)
    first.send(http_request())
    assert first.read_response().status == 200
    flood = client_of(server)
    assert flood.read_response().status == 503
    with pytest.raises(OSError):  # a reset once the server stops discarding (1 KiB + 256 KiB)
        for _ in range(1024):  # 64 MiB in all
            flood.send(b"z" * 65536)


def _held_sockets(server: HttpServer, client_of, idle: int, slow_headers: int, trickling: int):
    """Sockets that hold a connection open without a complete request: keep-alive
    sockets idle after one answered request, request heads cut off mid-headers,
    bodies cut off after their first bytes."""
    held = []
    for _ in range(idle):
        client = client_of(server)
        client.send(http_request("GET", "/warm"))
        assert client.read_response().status == 200
        held.append(client)
    for _ in range(slow_headers):
        client = client_of(server)
        client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        held.append(client)
    for _ in range(trickling):
        client = client_of(server)
        client.send(http_request("POST", "/slow", headers={"Content-Length": "1000"}) + b"x")
        held.append(client)
    return held


def test_held_idle_slow_and_trickling_sockets_take_no_thread_and_lock_nobody_out(
    serve, echo, client_of
):
    server = serve(echo, max_connections_per_client=100)
    threads_before = threading.active_count()
    held = _held_sockets(server, client_of, idle=30, slow_headers=30, trickling=30)
    assert threading.active_count() == threads_before
    for index in range(5):
        fresh = client_of(server)
        fresh.send(http_request("GET", f"/fresh/{index}"))
        reply = fresh.read_response()
        assert (reply.status, reply.json()["path"]) == (200, f"/fresh/{index}")
    assert all(not client.readable(timeout_s=0) for client in held)


def test_held_sockets_do_not_starve_a_single_worker(serve, echo, client_of):
    server = serve(echo, thread_count=1)
    _held_sockets(server, client_of, idle=5, slow_headers=5, trickling=5)
    fresh = client_of(server)
    fresh.send(http_request("GET", "/fresh"))
    assert fresh.read_response().status == 200


# -- deadlines -----------------------------------------------------------------


def test_idle_keep_alive_connection_is_closed_after_idle_timeout(serve, echo, client_of):
    server = serve(echo, idle_timeout_s=0.3, read_timeout_s=10)
    client = client_of(server)
    client.send(http_request())
    assert client.read_response().status == 200
    started = time.monotonic()
    client.assert_closed()
    assert time.monotonic() - started >= 0.2
    silent = client_of(server)
    started = time.monotonic()
    silent.assert_closed()
    assert time.monotonic() - started >= 0.2


def test_request_stalled_mid_body_gets_408(serve, echo, client_of):
    server = serve(echo, idle_timeout_s=10, read_timeout_s=0.3)
    client = client_of(server)
    client.send(http_request("POST", "/slow", headers={"Content-Length": "100"}) + b"x" * 10)
    started = time.monotonic()
    reply = client.read_response()
    assert time.monotonic() - started >= 0.2
    assert reply.status == 408
    assert reply.headers["connection"] == "close"
    assert reply.json() == {"error": "request body timed out"}
    client.assert_closed()
    assert echo.seen == []


def test_request_stalled_mid_headers_gets_408(serve, echo, client_of):
    server = serve(echo, idle_timeout_s=10, read_timeout_s=0.3)
    client = client_of(server)
    client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n")
    reply = client.read_response()
    assert reply.status == 408
    assert reply.json() == {"error": "request timed out"}
    client.assert_closed()


def test_headers_trickled_byte_by_byte_still_time_out(serve, echo, client_of):
    server = serve(echo, idle_timeout_s=10, read_timeout_s=0.5)
    client = client_of(server)
    started = time.monotonic()
    for byte in b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * 200:
        try:
            client.send(bytes([byte]))
        except OSError:
            break
        if client.readable(timeout_s=0.05):
            break
    reply = client.read_response()
    assert reply.status == 408
    assert time.monotonic() - started < 5, "a trickling client held the connection"
    client.assert_closed()


def test_trickled_body_is_cut_at_its_total_deadline_with_408(serve, echo, client_of):
    server = serve(echo, idle_timeout_s=10, read_timeout_s=0.5)
    client = client_of(server)
    client.send(http_request("POST", "/trickle", headers={"Content-Length": "1000"}))
    started = time.monotonic()
    for _ in range(100):  # one byte per 0.05 s: each read comes well within read_timeout_s
        if client.readable(timeout_s=0.05):
            break
        client.send(b"x")
    reply = client.read_response()
    assert reply.status == 408
    assert time.monotonic() - started < 2.0, "a trickled body held the connection"
    assert reply.headers["connection"] == "close"
    assert reply.json() == {"error": "request body timed out"}
    client.assert_closed()
    assert echo.seen == []


def test_body_slower_than_the_minimum_rate_is_cut_after_read_timeout(serve, echo, client_of):
    server = serve(echo, read_timeout_s=0.3, min_transfer_bytes_per_s=1000)
    client = client_of(server)
    client.send(http_request("POST", "/big", headers={"Content-Length": "100000"}) + b"y" * 400)
    started = time.monotonic()
    reply = client.read_response()  # deadline 0.3 s + 400 bytes / 1000 B/s = 0.7 s
    assert 0.5 <= time.monotonic() - started < 3.0
    assert reply.status == 408
    assert reply.json() == {"error": "request body timed out"}


def test_response_not_read_within_the_send_deadline_closes_the_connection(serve, client_of):
    big = np.zeros(32 * 1024 * 1024, dtype=np.uint8)
    server = serve(
        lambda request: HttpResponse(200, [big]),
        read_timeout_s=0.3,
        min_transfer_bytes_per_s=1_000_000_000,
    )
    reader = client_of(server)
    reader.send(http_request("GET", "/big"))
    assert reader.readable(timeout_s=CLIENT_TIMEOUT_S)

    def dropped() -> bool:
        return server.open_connections == 0

    wait_for(dropped, 5, what="the server to drop a reader that stopped reading")


# -- workers -------------------------------------------------------------------


def test_slow_reader_of_a_large_response_does_not_hold_the_worker(serve, client_of):
    big = np.zeros(32 * 1024 * 1024, dtype=np.uint8)

    def handler(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, [big] if request.path == "/big" else [b"small"])

    server = serve(handler, thread_count=1)
    reader = client_of(server)
    reader.send(http_request("GET", "/big"))  # never read: the response cannot all be sent
    assert reader.readable(timeout_s=CLIENT_TIMEOUT_S)
    fresh = client_of(server)
    fresh.send(http_request("GET", "/small"))
    assert fresh.read_response().body == b"small"


def test_a_lingering_worker_yields_to_a_request_queued_meanwhile(serve, echo, client_of):
    server = serve(echo, thread_count=1, linger_s=30.0)
    first = client_of(server)
    first.send(http_request("GET", "/first"))
    assert first.read_response().status == 200  # its worker now waits for its next request
    second = client_of(server)
    started = time.monotonic()
    second.send(http_request("GET", "/second"))
    assert second.read_response().json()["path"] == "/second"
    assert time.monotonic() - started < 5.0
    first.send(http_request("GET", "/first-again"))
    assert first.read_response().json()["path"] == "/first-again"
