"""The least a Python server spends on issue 25's rows: measured beside
edgebox and Triton in ``bench/vs_triton.py``, so every run says how far any
Python front end could get on this machine.

Run as a child process (``python -m bench.python_floor HTTP_PORT GRPC_PORT``),
it answers the bench's ``add_sub`` and ``lane`` with what they compute and
nothing else: HTTP/1.1 with a thread per connection, ``httptools`` parsing,
Triton's binary tensor extension and one ``sendmsg`` per answer; gRPC with
grpc's synchronous server, ``ModelInfer`` as bytes through edgebox's
zero-copy ``raw_messages``. No limits, no access control, no statistics, no
scheduler: a floor, never a server to run.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from concurrent import futures

import grpc
import httptools
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from edgebox.protocol.grpc.raw_messages import join_infer_response, split_infer_request

LANE_SIZE = 2784 * 77


def compute(model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The bench models' answers, as their ``model.py`` computes them."""
    if model == "add_sub":
        a, b = inputs["INPUT0"], inputs["INPUT1"]
        return {"OUTPUT0": a + b, "OUTPUT1": a - b}
    image = inputs["input"]
    lanes = (image.reshape(-1)[:LANE_SIZE] * 2.0).reshape(1, 2784, 77)
    return {"predict_lanes": lanes.astype(np.float32)}


class _Request:
    """httptools' callbacks for one request at a time on one connection."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body = bytearray()
        self.complete = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


def _answer_http(request: _Request) -> list:
    path = request.url.decode()
    if not path.endswith("/infer"):
        return [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]
    model = path.split("/")[3]
    body = memoryview(request.body)
    header_length = int(request.headers.get(b"inference-header-content-length", len(body)))
    document = json.loads(body[:header_length].tobytes())
    inputs, at = {}, header_length
    for item in document["inputs"]:
        size = item["parameters"]["binary_data_size"]
        inputs[item["name"]] = np.frombuffer(body[at : at + size], np.float32).reshape(
            item["shape"]
        )
        at += size
    outputs = compute(model, inputs)
    header = json.dumps(
        {
            "model_name": model,
            "model_version": "1",
            "outputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": list(array.shape),
                    "parameters": {"binary_data_size": array.nbytes},
                }
                for name, array in outputs.items()
            ],
        }
    ).encode()
    length = len(header) + sum(a.nbytes for a in outputs.values())
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()
    return [head, header, *outputs.values()]


def _connection(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = _Request()
    parser = httptools.HttpRequestParser(request)
    with conn:
        while True:
            data = conn.recv(1 << 20)
            if not data:
                return
            parser.feed_data(data)
            if request.complete:
                buffers = _answer_http(request)
                total = sum(memoryview(b).nbytes for b in buffers)
                sent = conn.sendmsg(buffers)
                if sent < total:
                    conn.sendall(b"".join(bytes(memoryview(b).cast("B")) for b in buffers)[sent:])
                request = _Request()
                parser = httptools.HttpRequestParser(request)


def serve_http(port: int) -> None:
    listener = socket.create_server(("127.0.0.1", port), backlog=128)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_connection, args=(conn,), daemon=True).start()


def _model_infer(data: bytes, context) -> bytes:
    message, raw = split_infer_request(data)
    inputs = {
        tensor.name: np.frombuffer(raw[i], np.float32).reshape(list(tensor.shape))
        for i, tensor in enumerate(message.inputs)
    }
    outputs = compute(message.model_name, inputs)
    answer = pb.ModelInferResponse(model_name=message.model_name, model_version="1")
    for name, array in outputs.items():
        answer.outputs.add(name=name, datatype="FP32", shape=list(array.shape))
    return join_infer_response(answer, list(outputs.values()))


def serve_grpc(port: int) -> grpc.Server:
    server = grpc.server(
        futures.ThreadPoolExecutor(32), options=[("grpc.max_receive_message_length", -1)]
    )
    handler = grpc.unary_unary_rpc_method_handler(_model_infer)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "inference.GRPCInferenceService", {"ModelInfer": handler}
            ),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server


def main(argv: list[str]) -> int:
    http_port, grpc_port = int(argv[0]), int(argv[1])
    server = serve_grpc(grpc_port)
    try:
        serve_http(http_port)
    finally:
        server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
