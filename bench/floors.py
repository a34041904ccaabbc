"""The two floors the daemon is compared with, measured in the same run.

* Direct: ONNX Runtime called in this process on one thread, same model file,
  same input, default session options (as the daemon's config leaves them).
* Socket: a loopback TCP round trip that carries the request's body size up
  and the response's body size back, to a server in a separate process that
  reads every byte before answering. It is the least any networked server can
  pay to move the bytes, with no HTTP and no parsing.
"""

from __future__ import annotations

import multiprocessing
import socket
import struct
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bench.latency import Round, timed_calls

_SIZES = struct.Struct("!QQ")


class DirectSession:
    """``InferenceSession.run`` on the calling thread."""

    def __init__(self, model_path: Path, feeds: dict[str, np.ndarray]) -> None:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.feeds = feeds

    def run(self) -> list[np.ndarray]:
        return self.session.run(None, self.feeds)

    def measure(self, duration_s: float, max_calls: int) -> Round:
        return timed_calls(self.run, duration_s, max_calls)


class SocketFloor:
    """A sink-and-reply server in a child process, and one connection per
    payload shape. ``close`` stops the child."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child,), name="bench-socket-floor", daemon=True
        )
        self._process.start()
        if not parent.poll(30):
            self._process.kill()
            raise RuntimeError("socket floor server did not report its port within 30 s")
        self.port = parent.recv()
        parent.close()

    def connect(self, request_bytes: int, response_bytes: int) -> SocketRoundTrip:
        return SocketRoundTrip(self.port, request_bytes, response_bytes)

    def close(self) -> None:
        self._process.terminate()
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


class SocketRoundTrip:
    """One connection: each round trip sends ``request_bytes`` and waits for
    ``response_bytes``."""

    def __init__(self, port: int, request_bytes: int, response_bytes: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(_SIZES.pack(request_bytes, response_bytes))
        self.request = np.random.default_rng(1).bytes(request_bytes)
        self.reply = memoryview(bytearray(response_bytes))

    def round_trip(self) -> None:
        self.sock.sendall(self.request)
        _receive_exactly(self.sock, self.reply)

    def measure(self, duration_s: float, max_calls: int) -> Round:
        return timed_calls(self.round_trip, duration_s, max_calls)

    def close(self) -> None:
        self.sock.close()


def _receive_exactly(sock: socket.socket, buffer: memoryview) -> None:
    received = 0
    while received < len(buffer):
        count = sock.recv_into(buffer[received:])
        if count == 0:
            raise ConnectionError("socket floor: peer closed mid-message")
        received += count


def _serve(report) -> None:
    """Child process: accept connections, one thread each; a connection first
    says its two sizes, then every request of the first size gets a reply of
    the second."""
    import threading

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    report.send(listener.getsockname()[1])
    report.close()
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_sink_and_reply, args=(sock,), daemon=True).start()


def _sink_and_reply(sock: socket.socket) -> None:
    try:
        header = memoryview(bytearray(_SIZES.size))
        _receive_exactly(sock, header)
        request_bytes, response_bytes = _SIZES.unpack(header)
        request = memoryview(bytearray(request_bytes))
        reply = bytes(response_bytes)
        while True:
            _receive_exactly(sock, request)
            sock.sendall(reply)
    except (ConnectionError, OSError):
        pass
    finally:
        sock.close()
