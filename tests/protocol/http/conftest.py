"""Fixtures for the HTTP server tests: ``serve`` starts servers on port 0 and
stops them at teardown, ``client_of`` opens raw clients and closes them."""

from __future__ import annotations

import pytest
from http_client import CLIENT_TIMEOUT_S, HOST, EchoHandler, RawClient

from edgebox.protocol.http.server import HttpServer


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

    def connect(
        server: HttpServer, timeout_s: float = CLIENT_TIMEOUT_S, source: str = HOST
    ) -> RawClient:
        client = RawClient(server.port, timeout_s, source)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()
