"""What tritonclient's own simple_http_* / simple_grpc_* examples exercise and
the other e2e files do not: the asyncio clients, string infer over gRPC with a
simple_string-shaped model, HTTP async_infer, compression over gRPC, client
timeouts, custom headers, keepalive options, and unloading with dependents."""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control
from model_fixtures import (
    PYTHON_BACKEND,
    add_sub_infer_inputs,
    add_sub_tensors,
    copy_demo_repository,
    model_config,
    write_model,
)

CALLBACK_TIMEOUT_S = 30

# Two BYTES inputs holding decimal integers, answered as their sum and
# difference in decimal text: the shape of Triton's `simple_string` model.
STRING_MODEL = model_config(
    "simple_string", PYTHON_BACKEND, *add_sub_tensors("STRING"), max_batch_size=8
)

STRING_MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _ints(request, name):
    values = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
    return np.vectorize(lambda v: int(v))(values)


def _text(values):
    return np.vectorize(lambda v: str(v).encode(), otypes=[object])(values)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = _ints(request, "INPUT0")
            b = _ints(request, "INPUT1")
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", _text(a + b)),
                pb_utils.Tensor("OUTPUT1", _text(a - b)),
            ]))
        return responses
"""


# A model slower than the client is willing to wait: what the examples'
# client_timeout option guards against.
SLOW_MODEL = model_config("slow", PYTHON_BACKEND, {"IN": ("FP32", [1])}, {"OUT": ("FP32", [1])})

SLOW_MODEL_PY = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(2.0)
        return [
            pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())
            ])
            for r in requests
        ]
"""


pytestmark = pytest.mark.daemon_flags(*explicit_control("*"))


@pytest.fixture(scope="module")
def repository(repository):
    copy_demo_repository(repository)
    write_model(repository, "simple_string", STRING_MODEL, {"1/model.py": STRING_MODEL_PY})
    write_model(repository, "slow", SLOW_MODEL, {"1/model.py": SLOW_MODEL_PY})
    return repository


def add_sub_inputs(module, binary: bool = True):
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 2.0, dtype=np.float32)
    return a, b, add_sub_infer_inputs(module, a, b, binary_data=binary)


def string_inputs(module):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    inputs = [
        module.InferInput("INPUT0", [1, 16], "BYTES"),
        module.InferInput("INPUT1", [1, 16], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(
        np.array([str(x).encode() for x in a.flat], dtype=object).reshape(1, 16)
    )
    inputs[1].set_data_from_numpy(
        np.array([str(x).encode() for x in b.flat], dtype=object).reshape(1, 16)
    )
    return a, b, inputs


def as_ints(values: np.ndarray) -> np.ndarray:
    return np.array([int(v) for v in values.flat], dtype=np.int32).reshape(values.shape)


# -- asyncio clients (simple_http_aio_infer_client, simple_grpc_aio_*) -------------------------


def test_http_aio_client_checks_health_metadata_and_infers(daemon):
    async def scenario():
        async with httpaio.InferenceServerClient(daemon.url) as client:
            assert await client.is_server_live()
            assert await client.is_server_ready()
            assert await client.is_model_ready("add_sub")
            assert (await client.get_server_metadata())["name"] == "edgebox"
            assert (await client.get_model_metadata("add_sub"))["name"] == "add_sub"
            assert (await client.get_model_config("add_sub"))["max_batch_size"] == 8
            a, b, inputs = add_sub_inputs(httpaio)
            outputs = [
                httpaio.InferRequestedOutput("OUTPUT0"),
                httpaio.InferRequestedOutput("OUTPUT1"),
            ]
            results = await asyncio.gather(
                *(client.infer("add_sub", inputs, outputs=outputs) for _ in range(4))
            )
            return a, b, results

    a, b, results = asyncio.run(scenario())
    for result in results:
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_grpc_aio_client_infers_and_streams(daemon):
    async def scenario():
        async with grpcaio.InferenceServerClient(daemon.grpc_url) as client:
            assert await client.is_server_live()
            assert await client.is_server_ready()
            assert await client.is_model_ready("add_sub", "1")
            assert (await client.get_server_metadata()).name == "edgebox"
            assert (await client.get_model_metadata("add_sub")).name == "add_sub"
            a, b, inputs = add_sub_inputs(grpcaio)
            result = await client.infer("add_sub", inputs)

            async def requests():
                for request_id in ("s1", "s2", "s3"):
                    yield {"model_name": "add_sub", "inputs": inputs, "request_id": request_id}

            streamed = []
            async for answer, error in client.stream_infer(requests()):
                assert error is None
                streamed.append(answer)
                if len(streamed) == 3:
                    break
            return a, b, result, streamed

    a, b, result, streamed = asyncio.run(scenario())
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert sorted(r.get_response().id for r in streamed) == ["s1", "s2", "s3"]
    for answer in streamed:
        np.testing.assert_array_equal(answer.as_numpy("OUTPUT1"), a - b)


def test_grpc_aio_errors_carry_the_status(daemon):
    async def scenario():
        async with grpcaio.InferenceServerClient(daemon.grpc_url) as client:
            with pytest.raises(InferenceServerException) as caught:
                await client.infer("nope", add_sub_inputs(grpcaio)[2])
            return caught.value

    error = asyncio.run(scenario())
    assert error.status() == "StatusCode.NOT_FOUND"
    assert error.message() == "Request for unknown model: 'nope' is not found"


# -- strings (simple_grpc_string_infer_client, simple_http_string_infer_client) ----------------


def test_string_infer_over_grpc(grpc_client):
    a, b, inputs = string_inputs(grpcclient)
    result = grpc_client.infer("simple_string", inputs)
    np.testing.assert_array_equal(as_ints(result.as_numpy("OUTPUT0")), a + b)
    np.testing.assert_array_equal(as_ints(result.as_numpy("OUTPUT1")), a - b)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_string_infer_over_http(http_client, binary):
    a, b, inputs = string_inputs(httpclient)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary),
    ]
    result = http_client.infer("simple_string", inputs, outputs=outputs)
    np.testing.assert_array_equal(as_ints(result.as_numpy("OUTPUT0")), a + b)
    np.testing.assert_array_equal(as_ints(result.as_numpy("OUTPUT1")), a - b)


# -- async infer (simple_http_async_infer_client, simple_grpc_async_infer_client) --------------


def test_http_async_infer_returns_requests_to_wait_on(daemon):
    with httpclient.InferenceServerClient(daemon.url, concurrency=4) as client:
        a, b, inputs = add_sub_inputs(httpclient)
        pending = [client.async_infer("add_sub", inputs, request_id=str(i)) for i in range(4)]
        assert all(isinstance(p, httpclient.InferAsyncRequest) for p in pending)
        for i, request in enumerate(pending):
            result = request.get_result(timeout=CALLBACK_TIMEOUT_S)
            assert result.get_response()["id"] == str(i)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_grpc_async_infer_of_strings_calls_back(grpc_client):
    answers: queue.Queue = queue.Queue()
    a, b, inputs = string_inputs(grpcclient)
    grpc_client.async_infer(
        "simple_string", inputs, callback=lambda result, error: answers.put((result, error))
    )
    result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
    assert error is None
    np.testing.assert_array_equal(as_ints(result.as_numpy("OUTPUT0")), a + b)


# -- transport options (compression, timeouts, headers, keepalive) ----------------------------


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_grpc_compressed_infer(grpc_client, algorithm):
    a, b, inputs = add_sub_inputs(grpcclient)
    result = grpc_client.infer("add_sub", inputs, compression_algorithm=algorithm)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_custom_headers_are_accepted_over_http_and_grpc(http_client, grpc_client):
    def headers() -> dict:
        # The HTTP client adds its own entries to the dict it is given.
        return {"x-edgebox-test": "examples", "authorization": "Bearer not-checked"}

    a, b, inputs = add_sub_inputs(httpclient)
    assert http_client.is_server_ready(headers=headers())
    result = http_client.infer("add_sub", inputs, headers=headers())
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    a, b, inputs = add_sub_inputs(grpcclient)
    assert grpc_client.is_server_ready(headers=headers())
    result = grpc_client.infer("add_sub", inputs, headers=headers())
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_generous_client_timeout_lets_infer_finish(grpc_client):
    a, b, inputs = add_sub_inputs(grpcclient)
    result = grpc_client.infer("add_sub", inputs, client_timeout=CALLBACK_TIMEOUT_S)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_grpc_client_timeout_that_expires_is_deadline_exceeded(grpc_client):
    slow_input = grpcclient.InferInput("IN", [1], "FP32")
    slow_input.set_data_from_numpy(np.ones(1, dtype=np.float32))
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("slow", [slow_input], client_timeout=0.2)
    assert caught.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    assert grpc_client.is_server_ready()


def test_grpc_keepalive_options_keep_the_channel_usable(daemon):
    keepalive = grpcclient.KeepAliveOptions(
        keepalive_time_ms=10_000,
        keepalive_timeout_ms=5_000,
        keepalive_permit_without_calls=True,
        http2_max_pings_without_data=2,
    )
    with grpcclient.InferenceServerClient(daemon.grpc_url, keepalive_options=keepalive) as client:
        a, b, inputs = add_sub_inputs(grpcclient)
        for _ in range(3):
            result = client.infer("add_sub", inputs)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


# -- model control (simple_*_model_control) -----------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_unload_without_dependents_keeps_the_steps(http_client, grpc_client, transport):
    client = http_client if transport == "http" else grpc_client
    client.unload_model("square_diff")
    try:
        assert not client.is_model_ready("square_diff")
        assert client.is_model_ready("add_sub")
        assert client.is_model_ready("multiply")
    finally:
        client.load_model("square_diff")
    assert client.is_model_ready("square_diff")


def test_http_network_timeout_gives_up_on_a_slow_model(daemon):
    slow_input = httpclient.InferInput("IN", [1], "FP32")
    slow_input.set_data_from_numpy(np.ones(1, dtype=np.float32))
    with (
        httpclient.InferenceServerClient(daemon.url, network_timeout=0.2) as client,
        pytest.raises(Exception, match="timed out") as caught,
    ):
        client.infer("slow", [slow_input])
    assert not isinstance(caught.value, InferenceServerException)
    with httpclient.InferenceServerClient(daemon.url) as client:
        assert client.is_server_ready()


def test_aio_clients_control_models_and_read_the_index(daemon):
    async def scenario():
        async with httpaio.InferenceServerClient(daemon.url) as http_aio:
            await http_aio.unload_model("multiply")
            http_index = await http_aio.get_model_repository_index()
            http_unloaded = not await http_aio.is_model_ready("multiply")
            await http_aio.load_model("multiply")
            http_stats = await http_aio.get_inference_statistics("add_sub")
        async with grpcaio.InferenceServerClient(daemon.grpc_url) as grpc_aio:
            await grpc_aio.unload_model("multiply")
            grpc_index = await grpc_aio.get_model_repository_index(as_json=True)
            grpc_unloaded = not await grpc_aio.is_model_ready("multiply")
            await grpc_aio.load_model("multiply")
            grpc_ready = await grpc_aio.is_model_ready("multiply", "1")
        return http_index, http_unloaded, http_stats, grpc_index, grpc_unloaded, grpc_ready

    http_index, http_unloaded, http_stats, grpc_index, grpc_unloaded, grpc_ready = asyncio.run(
        scenario()
    )
    assert http_unloaded and grpc_unloaded and grpc_ready
    states = {(e["name"], e.get("version")): e["state"] for e in http_index}
    assert states[("add_sub", "1")] == "READY"
    assert states[("multiply", "1")] in ("UNLOADING", "UNAVAILABLE")
    grpc_states = {(e["name"], e.get("version")): e["state"] for e in grpc_index["models"]}
    assert grpc_states[("simple_string", "1")] == "READY"
    assert http_stats["model_stats"][0]["name"] == "add_sub"


def test_grpc_health_and_metadata_as_json(grpc_client):
    metadata = grpc_client.get_server_metadata(as_json=True)
    assert metadata["name"] == "edgebox"
    model = grpc_client.get_model_metadata("simple_string", as_json=True)
    assert model["inputs"][0] == {"name": "INPUT0", "datatype": "BYTES", "shape": ["-1", "16"]}
    config = grpc_client.get_model_config("simple_string", as_json=True)
    assert config["config"]["max_batch_size"] == 8
