"""The client end commands use to call a daemon (daemon_client.py), against
``HttpServer`` on 127.0.0.1 with small handlers: what it sends, and how each
kind of failure reaches the command."""

from __future__ import annotations

import socket

import pytest
from http_client import HOST, EchoHandler

from edgebox.protocol.http.daemon_client import (
    DaemonClient,
    DaemonRefused,
    DaemonUnreachable,
    daemon_url,
)
from edgebox.protocol.http.messages import HttpResponse, json_error_response


def client_of(server, headers: dict | None = None, timeout_s: float = 5.0) -> DaemonClient:
    return DaemonClient(f"http://{HOST}:{server.port}", headers or {}, timeout_s)


def test_get_and_post_send_the_headers_and_return_the_json_answer(serve):
    echo = EchoHandler()
    client = client_of(serve(echo), {"edgebox-api-key": "k" * 32})
    got = client.get("/v2/repository/rollouts")
    posted = client.post("/v2/repository/models/lane/rollout/abort")
    assert (got["method"], got["path"]) == ("GET", "/v2/repository/rollouts")
    assert (posted["method"], posted["path"], posted["body"]) == (
        "POST",
        "/v2/repository/models/lane/rollout/abort",
        "",
    )
    assert got["headers"]["edgebox-api-key"] == "k" * 32
    assert posted["headers"]["edgebox-api-key"] == "k" * 32


@pytest.mark.parametrize(("status", "forbidden"), [(400, False), (404, False), (403, True)])
def test_an_error_answer_is_refused_with_the_daemons_message(serve, status, forbidden):
    server = serve(lambda request: json_error_response(status, "model 'x': nope"))
    with pytest.raises(DaemonRefused) as refused:
        client_of(server).post("/v2/repository/models/x/rollout/promote")
    assert str(refused.value) == "model 'x': nope"
    assert refused.value.forbidden is forbidden


def test_an_error_answer_without_edgebox_json_names_its_status(serve):
    server = serve(lambda request: HttpResponse(502, [b"<html>bad gateway</html>"], "text/html"))
    with pytest.raises(DaemonRefused) as refused:
        client_of(server).get("/v2/repository/rollouts")
    assert str(refused.value) == (
        "HTTP 502 with no edgebox error message; is --url the daemon's HTTP port?"
    )


def test_an_answer_that_is_not_json_is_refused(serve):
    server = serve(lambda request: HttpResponse(200, [b"# HELP nv_inference"], "text/plain"))
    with pytest.raises(DaemonRefused) as refused:
        client_of(server).get("/v2/repository/rollouts")
    assert str(refused.value) == (
        f"http://{HOST}:{server.port}/v2/repository/rollouts did not answer JSON; is --url "
        "the daemon's HTTP port (not the dashboard's or the metrics')?"
    )


def test_a_port_nobody_listens_on_is_unreachable():
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    client = DaemonClient(f"http://{HOST}:{port}", {}, 5.0)
    with pytest.raises(DaemonUnreachable) as failure:
        client.get("/v2/repository/rollouts")
    assert str(failure.value).startswith(f"cannot reach the daemon at http://{HOST}:{port}: ")
    assert "Connection refused" in str(failure.value)
    assert str(failure.value).endswith(
        "; is edgebox running (systemctl status edgebox), and is --url its HTTP port?"
    )


def test_a_server_that_never_answers_is_given_up_at_the_timeout():
    with socket.socket() as silent:
        silent.bind((HOST, 0))
        silent.listen()
        port = silent.getsockname()[1]
        client = DaemonClient(f"http://{HOST}:{port}", {}, 0.2)
        with pytest.raises(DaemonUnreachable) as failure:
            client.get("/v2/repository/rollouts")
    assert str(failure.value) == f"no answer from http://{HOST}:{port} within 0.2 s (--timeout-s)"


def test_proxies_named_in_the_environment_are_not_used(serve, monkeypatch):
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        dead = probe.getsockname()[1]
    for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(variable, f"http://{HOST}:{dead}")
    for variable in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    answer = client_of(serve(EchoHandler())).get("/v2")
    assert answer["path"] == "/v2"


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://jetson.local:8000/", "http://jetson.local:8000"),
        ("https://[::1]:8443/edgebox", "https://[::1]:8443/edgebox"),
    ],
)
def test_url_may_be_host_and_port_or_an_http_url(given, url):
    assert daemon_url(given) == url


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("ftp://127.0.0.1:8000", "expected an http:// or https:// URL, got 'ftp://127.0.0.1:8000'"),
        ("http://:8000", "expected HOST:PORT or http://HOST:PORT, got 'http://:8000'"),
        ("127.0.0.1:8000?x=1", "expected HOST:PORT or http://HOST:PORT, got '127.0.0.1:8000?x=1'"),
        ("127.0.0.1:eighty", "'127.0.0.1:eighty' has no valid port number"),
    ],
)
def test_url_that_is_not_an_http_address_is_refused(given, problem):
    with pytest.raises(ValueError) as refused:
        daemon_url(given)
    assert str(refused.value) == problem
