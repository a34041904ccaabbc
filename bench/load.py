"""The load drivers. :class:`TritonLoad` is the contract's: the real
``tritonclient.http`` client, binary tensors both ways, the same request every
time. :class:`MinimalHttpLoad` is a diagnostic that sends the same bytes with
no client library at all.

Concurrency N means N threads, each with its own ``InferenceServerClient``
(hence its own keep-alive connection), each sending its next request as soon
as the last one answered: a closed loop, as N cameras would. The clients
share this process and its GIL; the server runs in its own process, but on a
small machine both share the same cores, which the bench's CPU-per-request
figures make visible.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import numpy as np
import tritonclient.http as httpclient

from bench.latency import Round, closed_loops, timed_calls
from bench.workload import Workload


class TritonLoad:
    """Drives one model on one server URL."""

    def __init__(self, url: str, workload: Workload) -> None:
        self.url = url
        self.workload = workload

    def _client(
        self,
    ) -> tuple[httpclient.InferenceServerClient, Callable[[], httpclient.InferResult]]:
        client = httpclient.InferenceServerClient(
            self.url, connection_timeout=30, network_timeout=60
        )
        inputs = self.workload.triton_inputs()
        outputs = self.workload.triton_outputs()
        name = self.workload.name

        def call() -> httpclient.InferResult:
            return client.infer(name, inputs, outputs=outputs)

        return client, call

    def check(self, expected: list[np.ndarray]) -> None:
        """One request, its outputs compared with ONNX Runtime's, so the numbers
        below are for a server that computes the right thing."""
        client, call = self._client()
        try:
            result = call()
            for name, want in zip(self.workload.output_names, expected, strict=True):
                got = result.as_numpy(name)
                if got is None or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    raise AssertionError(
                        f"{self.url}: model '{self.workload.name}' output '{name}' differs "
                        "from ONNX Runtime's"
                    )
        finally:
            client.close()

    def measure(self, concurrency: int, duration_s: float, max_calls: int) -> Round:
        """``concurrency`` closed-loop clients for ``duration_s`` (each stops at
        ``max_calls``); clients connect and send one untimed request first."""
        if concurrency == 1:
            client, call = self._client()
            try:
                call()
                return timed_calls(call, duration_s, max_calls)
            finally:
                client.close()

        def open_client(_index: int):
            client, call = self._client()
            return call, client.close

        return closed_loops(concurrency, duration_s, max_calls, open_client, "tritonclient")


class MinimalHttpLoad:
    """A keep-alive HTTP/1.1 client on a bare socket, one request at a time:
    tritonclient's exact request body sent with one ``sendmsg``, the response
    read into a reused buffer and not decoded. Not the contract's driver: its
    p50 minus the socket floor's is what the server itself adds, and
    tritonclient's p50 minus its p50 is what the client library adds."""

    def __init__(self, url: str, workload: Workload) -> None:
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            workload.triton_inputs(), outputs=workload.triton_outputs()
        )
        self.url = url
        self._head = (
            f"POST /v2/models/{workload.name}/infer HTTP/1.1\r\n"
            f"Host: {url}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Inference-Header-Content-Length: {json_size}\r\n\r\n"
        ).encode("latin-1")
        self._body = body
        self._reply = memoryview(bytearray(workload.response_bytes + 65536))
        self._sock: socket.socket | None = None

    def measure(self, duration_s: float, max_calls: int) -> Round:
        host, port = self.url.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=60)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._call()
            return timed_calls(self._call, duration_s, max_calls)
        finally:
            self._sock.close()
            self._sock = None

    def _call(self) -> None:
        sock = self._sock
        sent = sock.sendmsg([self._head, self._body])
        if sent < len(self._head):
            sock.sendall(self._head[sent:])
            sent = len(self._head)
        if sent < len(self._head) + len(self._body):
            sock.sendall(memoryview(self._body)[sent - len(self._head) :])
        reply = self._reply
        received = 0
        total = -1
        while total < 0 or received < total:
            count = sock.recv_into(reply[received:])
            if count == 0:
                raise ConnectionError(f"{self.url} closed the connection mid-response")
            received += count
            if total < 0:
                total = _response_length(bytes(reply[: min(received, 8192)]), self.url)


def _response_length(start: bytes, url: str) -> int:
    """Head plus body length once the head is complete, else -1."""
    end = start.find(b"\r\n\r\n")
    if end < 0:
        return -1
    lines = start[:end].decode("latin-1").split("\r\n")
    if lines[0].split(" ", 2)[1] != "200":
        raise RuntimeError(f"{url} answered {lines[0]!r}")
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return end + 4 + int(value)
    raise RuntimeError(f"{url} answered without Content-Length")
