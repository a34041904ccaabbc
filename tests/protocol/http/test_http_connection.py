"""One connection's side of the HTTP server (``connection``, ``request_reader``): framing,
pipelining, request bodies, request-head limits and responses, over raw sockets
against a tiny handler on 127.0.0.1, port 0. Every wait is bounded by a socket
timeout or a deadline."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading

import numpy as np
import pytest
from http_client import CLIENT_TIMEOUT_S, HOST, http_request

from daemon_process import wait_for
from edgebox.protocol.http.messages import HttpRequest, HttpResponse

# -- framing -------------------------------------------------------------------


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


# -- request bodies ------------------------------------------------------------


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


# -- request heads -------------------------------------------------------------


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


# -- responses -----------------------------------------------------------------


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
