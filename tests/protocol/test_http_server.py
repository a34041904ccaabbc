"""HttpServer on its own: raw sockets (and http.client) against a tiny handler on
127.0.0.1, port 0. Every wait is bounded by a socket timeout or a deadline."""

from __future__ import annotations

import hashlib
import http.client
import json
import select
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.protocol.http_server import HttpRequest, HttpResponse, HttpServer

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

    def __init__(self, port: int, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout_s)
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


@pytest.fixture
def serve():
    servers: list[HttpServer] = []

    def start(handler, **limits) -> HttpServer:
        server = HttpServer(handler, HOST, 0, **limits)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(timeout_s=2.0)


@pytest.fixture
def echo() -> EchoHandler:
    return EchoHandler()


@pytest.fixture
def client_of():
    clients: list[RawClient] = []

    def connect(server: HttpServer, timeout_s: float = CLIENT_TIMEOUT_S) -> RawClient:
        client = RawClient(server.port, timeout_s)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


# -- connections and framing ---------------------------------------------------


def test_start_binds_port_zero_and_reports_the_port(serve, echo):
    server = serve(echo)
    assert server.port > 0
    connection = http.client.HTTPConnection(HOST, server.port, timeout=CLIENT_TIMEOUT_S)
    connection.request("GET", "/hello")
    assert connection.getresponse().status == 200
    connection.close()


def test_keep_alive_serves_two_requests_on_one_connection(serve, echo):
    server = serve(echo)
    connection = http.client.HTTPConnection(HOST, server.port, timeout=CLIENT_TIMEOUT_S)
    try:
        connection.request("POST", "/first", body=b"one")
        first = connection.getresponse()
        first_body = json.loads(first.read())
        sock = connection.sock
        connection.request("GET", "/second")
        second = connection.getresponse()
        second_body = json.loads(second.read())
    finally:
        connection.close()
    assert first.status == second.status == 200
    assert first.getheader("Connection") is None
    assert sock is not None and connection.sock is None  # closed by us, not reopened in between
    assert (first_body["path"], first_body["body"]) == ("/first", "one")
    assert second_body["path"] == "/second"
    assert first_body["thread"] == second_body["thread"]


def test_pipelined_requests_are_answered_in_order(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    big = bytes(range(256)) * 1024  # longer than one read: the body is read past the parser
    client.send(
        http_request("POST", "/a", b"one")
        + http_request("GET", "/b")
        + http_request("POST", "/c", big)
        + http_request("POST", "/d", b"four")
    )
    replies = [client.read_response() for _ in range(4)]
    assert [r.status for r in replies] == [200] * 4
    assert [r.json()["path"] for r in replies] == ["/a", "/b", "/c", "/d"]
    assert [r.json()["body"] for r in replies] == ["one", "", big.decode("latin-1"), "four"]
    assert all("connection" not in r.headers for r in replies)


def test_pipelined_connection_close_applies_to_its_own_request(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(
        http_request("GET", "/a") + http_request("GET", "/b", headers={"Connection": "close"})
    )
    first, second = client.read_response(), client.read_response()
    assert (first.json()["path"], second.json()["path"]) == ("/a", "/b")
    assert "connection" not in first.headers
    assert second.headers["connection"] == "close"
    client.assert_closed()


def test_request_after_connection_close_is_not_served(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(
        http_request("GET", "/a", headers={"Connection": "close"}) + http_request("GET", "/b")
    )
    reply = client.read_response()
    assert reply.json()["path"] == "/a"
    assert reply.headers["connection"] == "close"
    client.assert_closed()
    assert [s["path"] for s in echo.seen] == ["/a"]


def test_path_is_percent_decoded_query_kept_and_headers_lower_cased(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(
        b"GET /v2/models/lane%20net/ready?x=1&y=%41 HTTP/1.1\r\nHost: t\r\n"
        b"X-Thing: a\r\nx-thing: b\r\n\r\n"
    )
    seen = client.read_response().json()
    assert seen["path"] == "/v2/models/lane net/ready"
    assert seen["query"] == "x=1&y=%41"
    assert seen["headers"]["x-thing"] == "a, b"
    assert seen["headers"]["host"] == "t"


def test_malformed_request_line_gets_400_json_and_close(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(b"GARBAGE / HTTP/1.1\r\nHost: t\r\n\r\n")
    reply = client.read_response()
    assert reply.status == 400
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["connection"] == "close"
    assert reply.json() == {"error": "malformed HTTP request: Invalid method encountered"}
    client.assert_closed()
    assert echo.seen == []


def test_invalid_content_length_gets_400(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: ten\r\n\r\n")
    reply = client.read_response()
    assert reply.status == 400
    assert reply.json() == {"error": "malformed HTTP request: Invalid character in Content-Length"}
    client.assert_closed()


def test_upgrade_request_is_refused(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(http_request("GET", "/", headers={"Connection": "Upgrade", "Upgrade": "websocket"}))
    reply = client.read_response()
    assert reply.status == 400
    assert reply.json() == {"error": "protocol upgrades are not supported"}
    client.assert_closed()


# -- request bodies ----------------------------------------------------------------


@pytest.mark.parametrize("expect", [False, True], ids=["plain", "expect-100"])
def test_body_over_limit_is_refused_before_it_is_sent(serve, echo, client_of, expect):
    server = serve(echo, max_request_bytes=1024)
    client = client_of(server)
    headers = {"Content-Length": "10000"}
    if expect:
        headers["Expect"] = "100-continue"
    client.send(http_request("POST", "/big", headers=headers))  # headers only, no body
    reply = client.read_response()
    assert reply.status == 413
    assert reply.headers["connection"] == "close"
    assert reply.json() == {
        "error": "request body of 10000 bytes exceeds the limit of 1024 bytes (--max-request-bytes)"
    }
    client.assert_closed()
    assert echo.seen == []


def test_body_over_limit_sent_with_its_headers_never_reaches_the_handler(serve, echo, client_of):
    server = serve(echo, max_request_bytes=1024)
    client = client_of(server)
    client.send(http_request("POST", "/big", b"x" * 2000))
    reply = client.read_response()
    assert reply.status == 413
    client.assert_closed()
    assert echo.seen == []


def test_body_at_the_limit_is_accepted(serve, echo, client_of):
    server = serve(echo, max_request_bytes=1024)
    client = client_of(server)
    client.send(http_request("POST", "/", b"y" * 1024))
    reply = client.read_response()
    assert reply.status == 200
    assert reply.json()["body"] == "y" * 1024


def test_expect_100_continue_gets_continue_then_the_answer(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(
        http_request("POST", "/up", headers={"Content-Length": "5", "Expect": "100-continue"})
    )
    status, status_line, headers = client.read_head()
    assert (status, status_line, headers) == (100, "HTTP/1.1 100 Continue", {})
    client.send(b"hello")
    reply = client.read_response()
    assert reply.status == 200
    assert reply.json()["body"] == "hello"
    assert echo.seen[0]["headers"]["expect"] == "100-continue"


def test_expect_100_continue_with_a_chunked_body(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server, timeout_s=2.0)
    client.send(
        http_request(
            "POST", "/up", headers={"Transfer-Encoding": "chunked", "Expect": "100-continue"}
        )
    )
    assert client.read_head()[0] == 100
    client.send(b"3\r\nabc\r\n0\r\n\r\n")
    assert client.read_response().json()["body"] == "abc"


def test_chunked_body_is_decoded(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(http_request("POST", "/chunked", headers={"Transfer-Encoding": "chunked"}))
    client.send(b"5\r\nhello\r\n")
    client.send(b"6\r\n world\r\n")
    client.send(b"0\r\n\r\n")
    reply = client.read_response()
    assert reply.status == 200
    assert reply.json()["body"] == "hello world"
    client.send(http_request("GET", "/after"))
    assert client.read_response().json()["path"] == "/after"


def test_chunked_body_over_limit_is_refused(serve, echo, client_of):
    server = serve(echo, max_request_bytes=1024)
    client = client_of(server)
    client.send(http_request("POST", "/chunked", headers={"Transfer-Encoding": "chunked"}))
    client.send(b"3e8\r\n" + b"a" * 1000 + b"\r\n")
    client.send(b"64\r\n" + b"b" * 100 + b"\r\n")  # 1100 bytes in all; no last chunk
    reply = client.read_response()
    assert reply.status == 413
    assert reply.json() == {
        "error": "chunked request body exceeds the limit of 1024 bytes (--max-request-bytes)"
    }
    client.assert_closed()
    assert echo.seen == []


def test_complete_chunked_body_over_limit_never_reaches_the_handler(serve, echo, client_of):
    server = serve(echo, max_request_bytes=1024)
    client = client_of(server)
    body = b"7d0\r\n" + b"c" * 2000 + b"\r\n0\r\n\r\n"
    client.send(http_request("POST", "/chunked", headers={"Transfer-Encoding": "chunked"}) + body)
    reply = client.read_response()
    assert reply.status == 413
    client.assert_closed()
    assert echo.seen == []


def test_large_body_arrives_intact_in_a_writable_exact_buffer(serve, client_of):
    seen: list[dict] = []

    def handler(request: HttpRequest) -> HttpResponse:
        body = request.body
        seen.append(
            {
                "len": len(body),
                "nbytes": body.nbytes,
                "readonly": body.readonly,
                "sha": hashlib.sha256(body).hexdigest(),
                "start_offset": np.frombuffer(body, np.uint8).ctypes.data % 64,
            }
        )
        body[0] ^= 0xFF  # must not raise: the handler may decode in place
        return HttpResponse(200, [b"ok"])

    server = serve(handler)
    client = client_of(server)
    payload = np.random.default_rng(7).bytes(8 * 1024 * 1024)
    client.send(http_request("POST", "/big", payload))
    reply = client.read_response()
    assert (reply.status, reply.body) == (200, b"ok")
    assert seen == [
        {
            "len": len(payload),
            "nbytes": len(payload),
            "readonly": False,
            "sha": hashlib.sha256(payload).hexdigest(),
            "start_offset": 0,
        }
    ]


@pytest.mark.parametrize("size", [5000, 300_000], ids=["one-read", "many-reads"])
def test_align_body_at_puts_that_offset_on_a_64_byte_boundary(serve, client_of, size):
    def align_at(headers: dict[str, str]) -> int:
        return int(headers.get("x-align-at", "not a number"))

    def handler(request: HttpRequest) -> HttpResponse:
        offset = int(request.headers.get("x-align-at", "0"))
        offset = min(offset, len(request.body))
        address = np.frombuffer(request.body, np.uint8).ctypes.data + offset
        digest = hashlib.sha256(request.body).hexdigest()
        return HttpResponse(200, [json.dumps([address % 64, digest]).encode()])

    server = serve(handler, align_body_at=align_at)
    client = client_of(server)
    payload = np.random.default_rng(size).bytes(size)
    expected = hashlib.sha256(payload).hexdigest()
    for offset in (None, 0, 1, 3, 17, 63, 100, 4095, size + 10):
        headers = {} if offset is None else {"X-Align-At": str(offset)}
        client.send(http_request("POST", "/", payload, headers))
        reply = client.read_response()
        assert reply.json() == [0, expected], f"offset {offset}"


# -- responses -----------------------------------------------------------------------


def _buffers_handler(buffers: list):
    def handler(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, list(buffers), content_type="application/octet-stream")

    return handler


def _wire(buffers: list) -> bytes:
    return b"".join(
        b.tobytes() if isinstance(b, np.ndarray) else bytes(memoryview(b).cast("B"))
        for b in buffers
    )


def test_response_buffers_of_numpy_arrays_are_sent_intact(serve, client_of):
    buffers = [
        b'{"header":1}',
        np.arange(10, dtype=np.int16),
        np.array([[1.5, -2.5], [3.25, 4.0]], dtype=np.float64),
        np.array(True),
        np.zeros(0, dtype=np.float32),
        np.arange(6, dtype=np.float32).reshape(2, 3),
        bytearray(b"tail"),
        memoryview(np.arange(3, dtype=np.int32)),
    ]
    server = serve(_buffers_handler(buffers))
    client = client_of(server)
    client.send(http_request())
    reply = client.read_response()
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/octet-stream"
    assert reply.body == _wire(buffers)
    assert int(reply.headers["content-length"]) == len(_wire(buffers))


def test_large_response_survives_partial_sends_and_many_buffers(serve, client_of):
    rng = np.random.default_rng(3)
    big = rng.standard_normal(4 * 1024 * 1024).astype(np.float32)  # 16 MiB
    many = [np.full(3, i % 256, dtype=np.uint8) for i in range(2500)]  # > IOV_MAX pieces
    buffers = [b"head", big, *many, big[:1000]]
    server = serve(_buffers_handler(buffers))
    client = client_of(server)
    for _ in range(2):
        client.send(http_request())
        reply = client.read_response()
        assert reply.status == 200
        assert len(reply.body) == len(_wire(buffers))
        assert reply.body == _wire(buffers)


def test_head_sends_headers_only(serve, client_of):
    server = serve(lambda request: HttpResponse(200, [b"hello", np.arange(2, dtype=np.uint8)]))
    client = client_of(server)
    client.send(http_request("HEAD", "/"))
    head = client.read_response(head_only=True)
    assert head.status == 200
    assert head.headers["content-length"] == "7"  # what GET would send (RFC 9110 8.6)
    client.send(http_request("GET", "/"))
    reply = client.read_response()  # fails to parse if HEAD had sent body bytes
    assert reply.body == b"hello\x00\x01"


def test_handler_exception_gets_500_and_the_server_keeps_serving(serve, client_of):
    def handler(request: HttpRequest) -> HttpResponse:
        if request.path == "/boom":
            raise RuntimeError("kaput")
        return HttpResponse(200, [b"fine"])

    server = serve(handler)
    client = client_of(server)
    client.send(http_request("GET", "/boom"))
    reply = client.read_response()
    assert reply.status == 500
    assert reply.json() == {"error": "internal server error"}
    client.send(http_request("GET", "/ok"))
    assert client.read_response().body == b"fine"
    other = client_of(server)
    other.send(http_request("GET", "/ok"))
    assert other.read_response().body == b"fine"


# -- limits and timeouts ---------------------------------------------------------------


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


# -- connection exhaustion (issue 9, item 4) --------------------------------------------


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


def test_connection_over_the_per_client_cap_gets_a_readable_503(serve, echo, client_of):
    server = serve(echo, max_connections_per_client=2)
    first, second = client_of(server), client_of(server)
    for client in (first, second):
        client.send(http_request())
        assert client.read_response().status == 200
    third = client_of(server)
    third.send(http_request("POST", "/refused", b"z" * 300_000))  # a broken pipe if not drained
    reply = third.read_response()
    assert reply.status == 503
    assert reply.headers["connection"] == "close"
    assert reply.json() == {
        "error": "server busy: 2 connections already open from '127.0.0.1' "
        "(--http-max-connections-per-client)"
    }
    third.assert_closed()
    assert [s["path"] for s in echo.seen] == ["/", "/"]


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


def test_url_over_65535_bytes_gets_414_after_the_requests_before_it(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(
        http_request("GET", "/before")
        + http_request("GET", "/" + "u" * 70_000)
        + http_request("GET", "/after")
    )
    first = client.read_response()
    assert (first.status, first.json()["path"]) == (200, "/before")
    refused = client.read_response()
    assert refused.status == 414
    assert refused.headers["connection"] == "close"
    assert refused.json() == {"error": "request URL exceeds the limit of 65535 bytes"}
    client.assert_closed()
    assert [s["path"] for s in echo.seen] == ["/before"]


def test_url_of_65535_bytes_is_served(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    path = "/" + "u" * 65_534
    client.send(http_request("GET", path))
    reply = client.read_response()
    assert (reply.status, reply.json()["path"]) == (200, path)


def test_endless_request_head_gets_431(serve, echo, client_of):
    server = serve(echo)
    client = client_of(server)
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Endless: ")
    sent = 0
    while sent < 4_000_000 and not client.readable(timeout_s=0):
        client.send(b"h" * 65536)
        sent += 65536
    reply = client.read_response()
    assert reply.status == 431
    assert reply.json() == {
        "error": "request head (request line and headers) exceeds the limit of 262144 bytes"
    }
    assert echo.seen == []


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


def test_client_gone_turns_true_when_the_client_closes(serve, client_of):
    entered, observed = threading.Event(), []

    def handler(request: HttpRequest) -> HttpResponse:
        observed.append(request.client_gone())
        entered.set()
        observed.append(wait_for(request.client_gone, 5, what="client_gone"))
        return HttpResponse(200, [b"late"])

    server = serve(handler)
    client = client_of(server)
    client.send(http_request("GET", "/slow"))
    assert entered.wait(CLIENT_TIMEOUT_S)
    client.close()
    wait_for(lambda: len(observed) == 2, 6, what="the handler to see the client go")
    assert observed == [False, True]


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


MIB = 1024 * 1024


def test_bodies_held_at_once_are_capped_with_a_readable_503(serve, echo, client_of):
    server = serve(echo, max_request_bytes=MIB, max_body_bytes_in_flight=2 * MIB)
    slow = [client_of(server) for _ in range(2)]
    for client in slow:
        client.send(http_request("POST", "/slow", headers={"Content-Length": str(MIB)}))
        client.send(b"x" * 1000)
    wait_for(lambda: server.body_budget.held == 2 * MIB, 5, what="both bodies to be reserved")

    third = client_of(server)
    third.send(http_request("POST", "/third", headers={"Content-Length": str(MIB)}))
    reply = third.read_response()
    assert reply.status == 503
    assert reply.json() == {
        "error": f"server busy: a request body of {MIB} bytes would take the bodies held at "
        f"once past {2 * MIB} bytes (--http-max-body-bytes-in-flight); retry later"
    }

    slow[0].send(b"y" * (MIB - 1000))
    assert slow[0].read_response().status == 200
    wait_for(lambda: server.body_budget.held == MIB, 5, what="the served body to be released")
    fourth = client_of(server)
    fourth.send(http_request("POST", "/fourth", b"z" * MIB))
    assert fourth.read_response().status == 200


def test_a_chunked_body_counts_against_the_budget_as_it_grows(serve, echo, client_of):
    server = serve(echo, max_request_bytes=MIB, max_body_bytes_in_flight=MIB)
    holder = client_of(server)
    holder.send(http_request("POST", "/hold", headers={"Content-Length": str(MIB // 2 + 1)}))
    wait_for(lambda: server.body_budget.held == MIB // 2 + 1, 5, what="the body to be reserved")

    chunked = client_of(server)
    chunked.send(http_request("POST", "/chunked", headers={"Transfer-Encoding": "chunked"}))
    piece = b"c" * (MIB // 4)
    for _ in range(3):
        if chunked.readable(timeout_s=0):
            break
        try:
            chunked.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
        except OSError:
            break
    reply = chunked.read_response()
    assert reply.status == 503
    assert "(--http-max-body-bytes-in-flight)" in reply.json()["error"]


def test_every_reserved_body_byte_is_released_once_answered(serve, echo, client_of):
    server = serve(echo, max_request_bytes=MIB)
    client = client_of(server)
    for size in (70_000, 300_000, MIB):
        client.send(http_request("POST", "/sized", b"b" * size))
        assert client.read_response().status == 200
    chunked = client_of(server)
    chunked.send(
        http_request("POST", "/chunked", headers={"Transfer-Encoding": "chunked"})
        + b"%x\r\n" % 100_000
        + b"c" * 100_000
        + b"\r\n0\r\n\r\n"
    )
    assert chunked.read_response().status == 200
    wait_for(lambda: server.body_budget.held == 0, 5, what="every body to be released")
