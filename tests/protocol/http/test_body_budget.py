"""The cap on request bodies held at once (``body_budget``), through a real
HttpServer on 127.0.0.1, port 0: refusal before a body is read, chunked bodies
counted as they grow, and every reservation released once its body is freed."""

from __future__ import annotations

from http_client import http_request

from daemon_process import wait_for

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
