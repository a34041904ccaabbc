"""Python models that misbehave in ways Triton tolerates, through the real
daemon: one that reuses its output buffer, an ensemble step that writes into
its input, and models that raise ``BaseException``s (KeyboardInterrupt,
SystemExit, asyncio.CancelledError, GeneratorExit). Every client gets its own
answer or a 500 with the reason, the model keeps serving, and SIGTERM stops
the daemon at once."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from model_fixtures import (
    PYTHON_BACKEND,
    TIMES_TEN_IN_PLACE_MODEL,
    ensemble_config,
    model_config,
    write_model,
)

ELEMENTS = 4194304
"""16 MB of output: far more than the socket buffers hold for a client not reading."""

REUSED_BUFFER_CONFIG = model_config(
    "reused_buffer",
    PYTHON_BACKEND,
    {"X": ("FP32", [ELEMENTS])},
    {"Y": ("FP32", [ELEMENTS])},
    extra="instance_group [ { count: 1 kind: KIND_CPU } ]",
)

# Legal under Triton, which copies every output out of the model's process.
REUSED_BUFFER_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.out = np.empty(4194304, np.float32)

    def execute(self, requests):
        responses = []
        for request in requests:
            self.out[:] = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", self.out)]))
        return responses
"""


def _infer_input(value: float) -> httpclient.InferInput:
    tensor = httpclient.InferInput("X", [ELEMENTS], "FP32")
    tensor.set_data_from_numpy(np.full(ELEMENTS, value, np.float32))
    return tensor


def _send_without_reading(port: int, value: float) -> socket.socket:
    """An infer request whose client does not read the reply yet, so the
    daemon is still sending it while other requests run."""
    body, json_size = httpclient.InferenceServerClient.generate_request_body([_infer_input(value)])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    head = (
        "POST /v2/models/reused_buffer/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n"
        f"Inference-Header-Content-Length: {json_size}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def _read_reply(sock: socket.socket) -> np.ndarray:
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(65536)
    head, body = reply.split(b"\r\n\r\n", 1)
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {key.lower(): value for key, value in (line.split(": ", 1) for line in lines)}
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(1 << 20)
        assert chunk, "the daemon closed the connection mid-reply"
        body += chunk
    assert status.split()[1] == "200", f"{status}: {body[:300]!r}"
    result = httpclient.InferenceServerClient.parse_response_body(
        body, header_length=int(headers["inference-header-content-length"])
    )
    return result.as_numpy("Y")


def test_a_model_reusing_its_output_buffer_answers_each_client_its_own(
    tmp_path, start_daemon
) -> None:
    write_model(
        tmp_path, "reused_buffer", REUSED_BUFFER_CONFIG, {"1/model.py": REUSED_BUFFER_MODEL}
    )
    daemon = start_daemon(tmp_path)
    slow_reader = _send_without_reading(daemon.port, 1.0)
    wrong: list[str] = []

    def client_loop(client_id: int) -> None:
        with httpclient.InferenceServerClient(daemon.url, network_timeout=60) as client:
            for n in range(2):
                value = float(100 + client_id * 10 + n)
                y = client.infer("reused_buffer", [_infer_input(value)]).as_numpy("Y")
                if not np.all(y == value):
                    wrong.append(f"client {client_id} sent {value}, got {sorted(set(y[-4:]))}")

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    with slow_reader:
        y = _read_reply(slow_reader)
    if not np.all(y == 1.0):
        wrong.append(f"the slow reader sent 1.0, got {sorted(set(y[-4:]))}")
    assert wrong == []


def step_config(name: str) -> str:
    return model_config(name, PYTHON_BACKEND, {"IN": ("FP32", [4])}, {"OUT": ("FP32", [4])})


IDENTITY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
"""

SIBLINGS_ENSEMBLE_CONFIG = ensemble_config(
    "siblings",
    {"X": ("FP32", [4])},
    {"TIMES_TEN": ("FP32", [4]), "SAME": ("FP32", [4])},
    [
        ("times_ten_in_place", {"IN": "X"}, {"OUT": "TIMES_TEN"}),
        ("identity", {"IN": "X"}, {"OUT": "SAME"}),
    ],
)


def test_an_ensemble_step_writing_into_its_input_leaves_the_sibling_step_alone(
    tmp_path, start_daemon
) -> None:
    write_model(
        tmp_path,
        "times_ten_in_place",
        step_config("times_ten_in_place"),
        {"1/model.py": TIMES_TEN_IN_PLACE_MODEL},
    )
    write_model(
        tmp_path,
        "identity",
        step_config("identity"),
        {"1/model.py": IDENTITY_MODEL},
    )
    write_model(tmp_path, "siblings", SIBLINGS_ENSEMBLE_CONFIG, {"1/.keep": ""})
    daemon = start_daemon(tmp_path)
    x = np.array([1, 2, 3, 4], np.float32)
    with httpclient.InferenceServerClient(daemon.url, network_timeout=30) as client:
        for _ in range(20):
            inputs = [httpclient.InferInput("X", [4], "FP32")]
            inputs[0].set_data_from_numpy(x)
            result = client.infer("siblings", inputs)
            np.testing.assert_array_equal(result.as_numpy("SAME"), x)
            np.testing.assert_array_equal(result.as_numpy("TIMES_TEN"), x * 10)


# X picks what execute raises; any other value is echoed.
BASE_EXCEPTION_MODEL = """
import asyncio

import triton_python_backend_utils as pb_utils

RAISED = {
    1: KeyboardInterrupt,
    2: SystemExit,
    3: asyncio.CancelledError,
    4: GeneratorExit,
}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            raised = RAISED.get(int(x[0, 0]))
            if raised is not None:
                raise raised("raised by the model")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
"""

RAISED_NAMES = {
    1: "KeyboardInterrupt",
    2: "SystemExit",
    3: "CancelledError",
    4: "GeneratorExit",
}


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_a_model_raising_base_exceptions_answers_500_and_keeps_serving(
    tmp_path, start_daemon, batching
) -> None:
    config = model_config(
        "raising", PYTHON_BACKEND, {"X": ("INT32", [1])}, {"Y": ("INT32", [1])}, max_batch_size=4
    )
    if batching:
        config += "dynamic_batching { }\n"
    write_model(tmp_path, "raising", config, {"1/model.py": BASE_EXCEPTION_MODEL})
    daemon = start_daemon(tmp_path, "--exit-timeout-secs", "60")

    def infer(client, value: int):
        inputs = [httpclient.InferInput("X", [1, 1], "INT32")]
        inputs[0].set_data_from_numpy(np.array([[value]], np.int32))
        return client.infer("raising", inputs)

    with httpclient.InferenceServerClient(daemon.url, network_timeout=15) as client:
        for value, name in RAISED_NAMES.items():
            with pytest.raises(InferenceServerException) as raised:
                infer(client, value)
            assert raised.value.status() == "500"
            assert raised.value.message() == (
                f"model 'raising' version 1: execute() raised {name}: raised by the model "
                "(model.py line 20)"
            )
            assert infer(client, 7).as_numpy("Y").tolist() == [[7]]
        assert client.is_model_ready("raising")
    started = time.monotonic()
    assert daemon.stop(timeout_s=15) == 0
    assert time.monotonic() - started < 10
