"""Triton's system shared memory extension against the real daemon, over
HTTP and gRPC, driven by tritonclient.utils.shared_memory the way
tritonclient's simple_*_shm_client examples drive it: inputs read from and
outputs written into POSIX shm regions, every bound refused with the region
named, the daemon unharmed, regions unmapped on unregister."""

from __future__ import annotations

import json
import os
import queue
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor, triton_to_np_dtype

from model_fixtures import add_add_sub, add_types

CUDA_TEXT = "CUDA shared memory is not supported on this device (Jetson has no CUDA IPC)"


@pytest.fixture(scope="module")
def repository(repository):
    add_add_sub(repository)
    add_types(repository)
    return repository


@pytest.fixture(params=["http", "grpc"])
def transport(request, daemon):
    """(client module, connected client) for each transport; every region
    is unregistered afterwards."""
    module = httpclient if request.param == "http" else grpcclient
    url = daemon.url if request.param == "http" else daemon.grpc_url
    client = module.InferenceServerClient(url)
    yield module, client
    client.unregister_system_shared_memory()
    client.close()


@pytest.fixture
def regions():
    """Creates tritonclient shm regions with unique keys; destroys them after."""
    made = []

    def create(name: str, byte_size: int):
        key = f"/edgebox-e2e-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        handle = shm.create_shared_memory_region(name, key, byte_size)
        made.append(handle)
        return handle, key

    yield create
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def raised(call, *args, **kwargs) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call(*args, **kwargs)
    return caught.value.message()


def add_sub_request(module, in_region="input_data", out_sizes=(64, 64), out_offsets=(0, 0)):
    inputs = [
        module.InferInput("INPUT0", [1, 16], "FP32"),
        module.InferInput("INPUT1", [1, 16], "FP32"),
    ]
    inputs[0].set_shared_memory(in_region, 64)
    inputs[1].set_shared_memory(in_region, 64, offset=64)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output_data", out_sizes[0], offset=out_offsets[0])
    outputs[1].set_shared_memory("output_data", out_sizes[1], offset=out_offsets[1])
    return inputs, outputs


def output_meta(result, name: str) -> tuple[str, list[int]]:
    output = result.get_output(name)
    if isinstance(output, dict):
        return output["datatype"], output["shape"]
    return output.datatype, list(output.shape)


def mapped_keys(daemon) -> str:
    with open(f"/proc/{daemon.process.pid}/maps") as handle:
        return handle.read()


def test_add_sub_with_inputs_and_outputs_in_shared_memory(transport, regions, daemon):
    module, client = transport
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 3.0, dtype=np.float32)
    in_handle, in_key = regions("input_data", 128)
    out_handle, out_key = regions("output_data", 128)
    shm.set_shared_memory_region(in_handle, [a])
    shm.set_shared_memory_region(in_handle, [b], offset=64)
    client.register_system_shared_memory("input_data", in_key, 128)
    client.register_system_shared_memory("output_data", out_key, 128)

    inputs, outputs = add_sub_request(module, out_offsets=(0, 64))
    result = client.infer("add_sub", inputs, outputs=outputs)

    datatype, shape = output_meta(result, "OUTPUT0")
    assert (datatype, shape) == ("FP32", [1, 16])
    sums = shm.get_contents_as_numpy(out_handle, triton_to_np_dtype(datatype), shape)
    differences = shm.get_contents_as_numpy(
        out_handle, triton_to_np_dtype(datatype), shape, offset=64
    )
    np.testing.assert_array_equal(sums, a + b)
    np.testing.assert_array_equal(differences, a - b)
    if module is httpclient:
        assert result.get_output("OUTPUT1") == {
            "name": "OUTPUT1",
            "datatype": "FP32",
            "shape": [1, 16],
        }
    else:
        response = result.get_response()
        assert list(response.raw_output_contents) == [b"", b""]
        assert not response.outputs[1].parameters

    assert in_key[1:] in mapped_keys(daemon)
    client.unregister_system_shared_memory("input_data")
    assert in_key[1:] not in mapped_keys(daemon)
    assert out_key[1:] in mapped_keys(daemon)
    client.unregister_system_shared_memory()
    assert out_key[1:] not in mapped_keys(daemon)


def test_bytes_and_fp16_tensors_travel_through_shared_memory(transport, regions):
    module, client = transport
    text = np.array([b"ab", b"xyz"], dtype=np.object_)
    f16 = np.array([1.5, -2.0], dtype=np.float16)
    i64 = np.arange(4, dtype=np.int64).reshape(2, 2)
    serialized = serialize_byte_tensor(text)  # as simple_*_shm_string_client does
    text_bytes = serialized.item()
    in_handle, in_key = regions("typed_in", 64)
    out_handle, out_key = regions("typed_out", 64)
    shm.set_shared_memory_region(in_handle, [f16, i64])
    shm.set_shared_memory_region(in_handle, [serialized], offset=36)
    client.register_system_shared_memory("typed_in", in_key, 64)
    client.register_system_shared_memory("typed_out", out_key, 64)

    inputs = [
        module.InferInput("F16", [2], "FP16"),
        module.InferInput("I64", [2, 2], "INT64"),
        module.InferInput("TEXT", [2], "BYTES"),
    ]
    inputs[0].set_shared_memory("typed_in", 4)
    inputs[1].set_shared_memory("typed_in", 32, offset=4)
    inputs[2].set_shared_memory("typed_in", len(text_bytes), offset=36)
    # I64_PLUS_ONE comes back as data between two outputs written into shm.
    outputs = [module.InferRequestedOutput(n) for n in ("TEXT_UPPER", "I64_PLUS_ONE", "F16_TWICE")]
    outputs[0].set_shared_memory("typed_out", 32)
    outputs[2].set_shared_memory("typed_out", 4, offset=32)
    result = client.infer("types", inputs, outputs=outputs)

    upper = shm.get_contents_as_numpy(out_handle, np.object_, [2])
    assert upper.tolist() == [b"AB", b"XYZ"]
    twice = shm.get_contents_as_numpy(out_handle, np.float16, [2], offset=32)
    assert twice.tolist() == [3.0, -4.0]
    assert result.as_numpy("I64_PLUS_ONE").tolist() == (i64 + 1).tolist()


def test_grpc_stream_requests_use_shared_memory(daemon, regions):
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 5.0, dtype=np.float32)
    in_handle, in_key = regions("input_data", 128)
    out_handle, out_key = regions("output_data", 128)
    shm.set_shared_memory_region(in_handle, [a, b])
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        client.register_system_shared_memory("input_data", in_key, 128)
        client.register_system_shared_memory("output_data", out_key, 128)
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        inputs, outputs = add_sub_request(grpcclient, out_offsets=(0, 64))
        client.async_stream_infer("add_sub", inputs, outputs=outputs, request_id="1")
        result, error = answers.get(timeout=30)
        assert error is None and result.get_response().id == "1"
        inputs, outputs = add_sub_request(grpcclient, in_region="nope")
        client.async_stream_infer("add_sub", inputs, outputs=outputs, request_id="2")
        _, error = answers.get(timeout=30)
        assert error.message() == (
            "model 'add_sub', input 'INPUT0': shared memory region 'nope' is not registered"
        )
        client.stop_stream()
        np.testing.assert_array_equal(
            shm.get_contents_as_numpy(out_handle, np.float32, [1, 16], offset=64), a - b
        )
        client.unregister_system_shared_memory()
    assert in_key[1:] not in mapped_keys(daemon)  # the stream's lease ended with its final
    assert out_key[1:] not in mapped_keys(daemon)


def test_status_lists_regions(transport, regions):
    module, client = transport
    _, key = regions("status_data", 64)
    client.register_system_shared_memory("status_data", key, 32, offset=16)
    status = client.get_system_shared_memory_status()
    one = client.get_system_shared_memory_status("status_data")
    if module is httpclient:
        assert status == [{"name": "status_data", "key": key, "offset": 16, "byte_size": 32}]
        assert one == status
    else:
        region = status.regions["status_data"]
        assert (region.name, region.key, region.offset, region.byte_size) == (
            "status_data",
            key,
            16,
            32,
        )
        assert one == status
    assert raised(client.get_system_shared_memory_status, "zz") == (
        "system shared memory region 'zz': not registered"
    )


def test_registration_errors_name_the_region(transport, regions):
    _, client = transport
    _, key = regions("twice", 64)
    client.register_system_shared_memory("twice", key, 64)
    assert raised(client.register_system_shared_memory, "twice", key, 64) == (
        "system shared memory region 'twice': already registered; unregister it first"
    )
    assert raised(client.register_system_shared_memory, "gone", "/edgebox-e2e-missing", 8) == (
        "system shared memory region 'gone': no shared memory object with key "
        "'/edgebox-e2e-missing'"
    )
    assert raised(client.register_system_shared_memory, "long", key, 64, offset=8) == (
        f"system shared memory region 'long': offset 8 + byte_size 64 runs past the end of "
        f"key '{key}' (64 bytes)"
    )
    assert "is not a shared memory name" in raised(
        client.register_system_shared_memory, "escape", "../etc/passwd", 8
    )


def test_inference_bounds_are_checked_and_the_daemon_keeps_serving(transport, regions):
    module, client = transport
    in_handle, in_key = regions("input_data", 128)
    _, out_key = regions("output_data", 128)
    shm.set_shared_memory_region(in_handle, [np.ones((1, 16), np.float32)] * 2)
    client.register_system_shared_memory("input_data", in_key, 128)
    client.register_system_shared_memory("output_data", out_key, 128)

    inputs, outputs = add_sub_request(module, in_region="nope")
    assert raised(client.infer, "add_sub", inputs, outputs=outputs) == (
        "model 'add_sub', input 'INPUT0': shared memory region 'nope' is not registered"
    )
    inputs, outputs = add_sub_request(module, out_offsets=(0, 100))
    assert raised(client.infer, "add_sub", inputs, outputs=outputs) == (
        "model 'add_sub', output 'OUTPUT1': shared_memory_offset 100 + "
        "shared_memory_byte_size 64 runs past the end of shared memory region "
        "'output_data' (128 bytes)"
    )
    inputs, outputs = add_sub_request(module, out_sizes=(64, 60), out_offsets=(0, 64))
    assert raised(client.infer, "add_sub", inputs, outputs=outputs) == (
        "model 'add_sub' version 1, output 'OUTPUT1': 64 bytes do not fit in shared memory "
        "region 'output_data' (shared_memory_byte_size 60)"
    )
    inputs, outputs = add_sub_request(module, out_offsets=(0, 64))
    inputs[0].set_shared_memory("input_data", 32)
    assert raised(client.infer, "add_sub", inputs, outputs=outputs) == (
        "model 'add_sub', input 'INPUT0': shared_memory_byte_size is 32 but shape [1, 16] "
        "of FP32 needs 64 bytes"
    )
    inputs, outputs = add_sub_request(module, out_offsets=(0, 64))
    result = client.infer("add_sub", inputs, outputs=outputs)
    assert output_meta(result, "OUTPUT0") == ("FP32", [1, 16])


def test_cuda_shared_memory_cleanup_succeeds_and_registration_is_refused(transport):
    # NVIDIA's examples call unregister_cuda_shared_memory() before they start, as a
    # clean-up: nothing can be registered, so unregistering and listing are no-ops.
    _, client = transport
    client.unregister_cuda_shared_memory()
    client.unregister_cuda_shared_memory("output_data")
    status = client.get_cuda_shared_memory_status()
    assert list(status if isinstance(status, list) else status.regions) == []
    assert CUDA_TEXT in raised(client.register_cuda_shared_memory, "r", b"aGFuZGxl", 0, 64)
    assert CUDA_TEXT in raised(client.get_cuda_shared_memory_status, "r")


def test_http_routes_and_extensions(daemon):
    base = f"http://{daemon.url}/v2"

    def answer(method: str, path: str):
        request = urllib.request.Request(
            base + path, method=method, data=b"" if method == "POST" else None
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    assert answer("GET", "/cudasharedmemory/status") == (200, b"[]")
    assert answer("POST", "/cudasharedmemory/unregister") == (200, b"")
    status, body = answer("POST", "/cudasharedmemory/region/r/register")
    assert status == 400 and CUDA_TEXT in json.loads(body)["error"]
    assert answer("POST", "/systemsharedmemory/register")[0] == 400
    assert answer("GET", "/systemsharedmemory/register")[0] == 405
    assert answer("GET", "/systemsharedmemory/bogus")[0] == 404
    assert answer("GET", "/systemsharedmemory/status") == (200, b"[]")
    with urllib.request.urlopen(base, timeout=10) as reply:
        assert "system_shared_memory" in json.loads(reply.read())["extensions"]
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        assert "system_shared_memory" in client.get_server_metadata().extensions


def test_region_limits_come_from_the_settings(tmp_path, regions, start_daemon):
    repository = tmp_path / "repo"
    repository.mkdir()
    process = start_daemon(repository, "--shared-memory-max-regions", "1")
    with httpclient.InferenceServerClient(process.url) as client:
        _, key = regions("first", 16)
        client.register_system_shared_memory("first", key, 16)
        assert raised(client.register_system_shared_memory, "second", key, 16) == (
            "system shared memory region 'second': 1 regions are registered, the most "
            "allowed (shared_memory_max_regions 1)"
        )
