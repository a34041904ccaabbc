"""The official tritonclient.grpc client against a real daemon: every RPC the
issue names, sync, async_infer and streaming, load/unload in explicit mode,
the restricted protocol, errors with HTTP's text, and the seed-001 snippet
against the bundled lane detector."""

from __future__ import annotations

import json
import queue
import signal

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control
from model_fixtures import add_add_sub, add_sub_json_config, build_tritonclient_repository

CALLBACK_TIMEOUT_S = 30


pytestmark = pytest.mark.daemon_flags(*explicit_control("*"))


@pytest.fixture(scope="module")
def repository(repository):
    return build_tritonclient_repository(repository)


def add_sub_inputs(batch: int = 1, datatype: str = "FP32"):
    a = np.arange(16 * batch, dtype=np.float32).reshape(batch, 16)
    b = np.full((batch, 16), 2.0, dtype=np.float32)
    inputs = [
        grpcclient.InferInput("INPUT0", [batch, 16], datatype),
        grpcclient.InferInput("INPUT1", [batch, 16], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a.astype(np.float16) if datatype == "FP16" else a)
    inputs[1].set_data_from_numpy(b)
    return a, b, inputs


def raised(call, *args, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call(*args, **kwargs)
    return caught.value


# -- health and metadata ---------------------------------------------------------------


def test_health_and_server_metadata(grpc_client):
    assert grpc_client.is_server_live()
    assert grpc_client.is_server_ready()
    metadata = grpc_client.get_server_metadata()
    assert metadata.name == "edgebox"
    assert {"binary_tensor_data", "model_repository", "statistics", "model_configuration"} <= set(
        metadata.extensions
    )


def test_model_ready_metadata_and_config(grpc_client):
    assert grpc_client.is_model_ready("add_sub")
    assert grpc_client.is_model_ready("add_sub", "1")
    assert not grpc_client.is_model_ready("add_sub", "9")
    # As Triton's gRPC frontend: an unknown model is not ready, not an error.
    assert not grpc_client.is_model_ready("nope")
    metadata = grpc_client.get_model_metadata("add_sub")
    assert (metadata.name, list(metadata.versions), metadata.platform) == (
        "add_sub",
        ["1"],
        "onnxruntime_onnx",
    )
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
        ("INPUT0", "FP32", [-1, 16]),
        ("INPUT1", "FP32", [-1, 16]),
    ]
    assert grpc_client.get_model_metadata("add_sub", as_json=True)["inputs"][0]["name"] == "INPUT0"
    config = grpc_client.get_model_config("add_sub").config
    assert config.max_batch_size == 8
    assert list(config.input[0].dims) == [16]
    assert config.input[0].data_type == grpcclient.model_config_pb2.TYPE_FP32


def test_versioned_calls_pick_the_version(grpc_client):
    assert list(grpc_client.get_model_metadata("add_sub_v2").versions) == ["2"]
    _, _, inputs = add_sub_inputs()
    result = grpc_client.infer("add_sub_v2", inputs, model_version="2")
    assert result.get_response().model_version == "2"
    error = raised(grpc_client.infer, "add_sub_v2", inputs, model_version="1")
    assert error.status() == "StatusCode.NOT_FOUND"
    assert error.message() == "Request for unknown model: 'add_sub_v2' version 1 is not found"


# -- inference ----------------------------------------------------------------------------


def test_sync_infer_sends_raw_inputs_and_gets_raw_outputs(grpc_client):
    a, b, inputs = add_sub_inputs(batch=3)
    outputs = [
        grpcclient.InferRequestedOutput("OUTPUT0"),
        grpcclient.InferRequestedOutput("OUTPUT1"),
    ]
    result = grpc_client.infer("add_sub", inputs, outputs=outputs, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert (response.id, response.model_name, response.model_version) == ("req-7", "add_sub", "1")
    assert len(response.raw_output_contents) == 2


def test_requested_output_subset_only(grpc_client):
    _, _, inputs = add_sub_inputs()
    result = grpc_client.infer(
        "add_sub", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT1")]
    )
    assert [o.name for o in result.get_response().outputs] == ["OUTPUT1"]


def test_fp16_int64_bytes_through_python_model(grpc_client):
    f16 = np.array([0.5, 1.5, -2.25], dtype=np.float16)
    i64 = np.array([[1, 2], [3, 2**40]], dtype=np.int64)
    text = np.array([b"lane", b"edge box"], dtype=object)
    inputs = [
        grpcclient.InferInput("F16", [3], "FP16"),
        grpcclient.InferInput("I64", [2, 2], "INT64"),
        grpcclient.InferInput("TEXT", [2], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(f16)
    inputs[1].set_data_from_numpy(i64)
    inputs[2].set_data_from_numpy(text)
    result = grpc_client.infer("types", inputs)
    np.testing.assert_array_equal(result.as_numpy("F16_TWICE"), f16 * 2)
    assert result.as_numpy("F16_TWICE").dtype == np.float16
    np.testing.assert_array_equal(result.as_numpy("I64_PLUS_ONE"), i64 + 1)
    assert result.as_numpy("TEXT_UPPER").tolist() == [b"LANE", b"EDGE BOX"]


def test_typed_contents_are_accepted_as_triton_accepts_them(daemon):
    """tritonclient always sends raw bytes; other clients send ``contents``."""
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc

    a = np.arange(16, dtype=np.float32)
    request = pb.ModelInferRequest(model_name="add_sub")
    for name, values in (("INPUT0", a), ("INPUT1", np.ones(16, dtype=np.float32))):
        item = request.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        item.contents.fp32_contents.extend(values.tolist())
    with grpc.insecure_channel(daemon.grpc_url) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(
            request, timeout=30
        )
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_array_equal(
        np.frombuffer(response.raw_output_contents[0], dtype=np.float32), a + 1
    )


def test_async_infer_calls_back_with_each_result(grpc_client):
    answers: queue.Queue = queue.Queue()
    expected = {}
    for batch in (1, 2, 3):
        a, b, inputs = add_sub_inputs(batch)
        expected[str(batch)] = a + b
        grpc_client.async_infer(
            "add_sub",
            inputs,
            callback=lambda result, error: answers.put((result, error)),
            request_id=str(batch),
        )
    for _ in range(len(expected)):
        result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
        assert error is None
        request_id = result.get_response().id
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), expected.pop(request_id))
    assert expected == {}


def test_stream_answers_every_request_once_and_errors_in_the_stream(grpc_client):
    answers: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        sums = {}
        for index in range(8):
            a, b, inputs = add_sub_inputs(batch=1 + index % 3)
            sums[f"ok-{index}"] = a + b
            grpc_client.async_stream_infer("add_sub", inputs, request_id=f"ok-{index}")
        _, _, inputs = add_sub_inputs()
        grpc_client.async_stream_infer("nope", inputs, request_id="bad")
        _, _, wrong = add_sub_inputs(datatype="FP16")
        grpc_client.async_stream_infer("add_sub", wrong, request_id="wrong")
        results, errors = {}, []
        for _ in range(10):
            result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
            if error is not None:
                errors.append(error.message())
            else:
                results[result.get_response().id] = result.as_numpy("OUTPUT0")
        assert sorted(errors) == [
            "Request for unknown model: 'nope' is not found",
            "model 'add_sub' version 1, input 'INPUT0': expected datatype FP32, got FP16",
        ]
        assert sorted(results) == sorted(sums)
        for request_id, total in sums.items():
            np.testing.assert_array_equal(results[request_id], total)
        # The stream goes on after an error.
        a, b, inputs = add_sub_inputs()
        grpc_client.async_stream_infer("add_sub", inputs, request_id="after")
        result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
        assert error is None
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    finally:
        grpc_client.stop_stream()
    assert answers.empty()


def test_errors_carry_the_text_http_sends(grpc_client, http_client):
    good = np.zeros((1, 16), dtype=np.float32)
    cases = [
        ("nope", [good, good], "StatusCode.NOT_FOUND"),
        ("add_sub", [good.astype(np.float16), good], "StatusCode.INVALID_ARGUMENT"),
        ("add_sub", [np.zeros((9, 16), np.float32)] * 2, "StatusCode.INVALID_ARGUMENT"),
        ("add_sub", [good], "StatusCode.INVALID_ARGUMENT"),
        ("add_sub", [np.zeros((1, 15), np.float32), good], "StatusCode.INVALID_ARGUMENT"),
    ]
    for model, arrays, status in cases:
        over_grpc = raised(grpc_client.infer, model, tensors(grpcclient, arrays))
        over_http = raised(http_client.infer, model, tensors(httpclient, arrays))
        assert over_grpc.status() == status
        assert over_grpc.message() == over_http.message()
    assert grpc_client.is_server_ready()


def tensors(module, arrays: list[np.ndarray]) -> list:
    inputs = []
    for index, array in enumerate(arrays):
        datatype = "FP16" if array.dtype == np.float16 else "FP32"
        item = module.InferInput(f"INPUT{index}", list(array.shape), datatype)
        item.set_data_from_numpy(array)
        inputs.append(item)
    return inputs


def test_statistics_count_requests(grpc_client):
    _, _, inputs = add_sub_inputs()
    before = grpc_client.get_inference_statistics("add_sub").model_stats[0]
    for _ in range(3):
        grpc_client.infer("add_sub", inputs)
    after = grpc_client.get_inference_statistics("add_sub").model_stats[0]
    assert after.inference_stats.success.count == before.inference_stats.success.count + 3
    assert after.execution_count == before.execution_count + 3
    assert after.inference_stats.compute_infer.ns > before.inference_stats.compute_infer.ns
    every = grpc_client.get_inference_statistics()
    assert {"add_sub", "multiply", "square_diff"} <= {s.name for s in every.model_stats}
    error = raised(grpc_client.get_inference_statistics, "nope")
    assert (error.status(), error.message()) == (
        "StatusCode.INVALID_ARGUMENT",
        "requested model 'nope' is not available",
    )


def test_cuda_shared_memory_registration_is_answered_unimplemented(grpc_client):
    # System shared memory is served: tests/e2e/test_system_shared_memory.py.
    assert list(grpc_client.get_cuda_shared_memory_status().regions) == []
    error = raised(grpc_client.register_cuda_shared_memory, "r", b"aGFuZGxl", 0, 64)
    assert error.status() == "StatusCode.UNIMPLEMENTED"
    assert "CUDA shared memory is not supported on this device" in error.message()


# -- repository extension ---------------------------------------------------------------------


def test_repository_index_load_and_unload(grpc_client):
    index = {(m.name, m.version): m for m in grpc_client.get_model_repository_index().models}
    assert index[("add_sub", "1")].state == "READY"
    grpc_client.unload_model("multiply")
    assert not grpc_client.is_model_ready("multiply")
    index = {(m.name, m.version): m for m in grpc_client.get_model_repository_index().models}
    assert index[("multiply", "1")].state in ("UNLOADING", "UNAVAILABLE")
    grpc_client.load_model("multiply")
    assert grpc_client.is_model_ready("multiply")
    error = raised(grpc_client.load_model, "nope")
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "failed to load 'nope', failed to poll from model repository: "
        "no model folder 'nope' in the model repository"
    )


def test_load_with_config_override(grpc_client):
    override = json.dumps(add_sub_json_config(max_batch_size=4))
    grpc_client.load_model("add_sub", config=override)
    assert grpc_client.get_model_config("add_sub").config.max_batch_size == 4
    # As in Triton 2.51: a plain load keeps the override while the files are
    # unchanged; after an unload it reads the files again.
    grpc_client.load_model("add_sub")
    assert grpc_client.get_model_config("add_sub").config.max_batch_size == 4
    grpc_client.unload_model("add_sub")
    grpc_client.load_model("add_sub")
    assert grpc_client.get_model_config("add_sub").config.max_batch_size == 8


def test_load_with_model_files_needs_a_config(grpc_client):
    """Loading from files works (tests/e2e/test_load_model_files.py); without
    ``config`` it is refused, as Triton refuses it, and nothing changes."""
    error = raised(grpc_client.load_model, "add_sub", files={"file:1/model.onnx": b"x"})
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "failed to load 'add_sub', failed to poll from model repository: "
        "Load parameter 'config' must be specified for model file override"
    )
    assert grpc_client.is_model_ready("add_sub")


# -- the seeds' client ------------------------------------------------------------------------


def test_seed_001_snippet_runs_against_the_bundled_lane_detector(grpc_client, http_client):
    """Seed 001's calls, pointed at the bundled model. Its config takes FP32
    (the seed's LaneDet_fp16 engine took FP16; the config decides, as in
    Triton) and has no output '914'."""
    frame = np.random.default_rng(1).random([1, 3, 360, 640]).astype(np.float32)
    inputs = [grpcclient.InferInput("input", [1, 3, 360, 640], "FP32")]
    outputs = [grpcclient.InferRequestedOutput("predict_lanes")]
    inputs[0].set_data_from_numpy(frame)
    result = grpc_client.infer("lane_detector", inputs=inputs, outputs=outputs)
    output = result.as_numpy("predict_lanes")
    assert output.shape == (1, 2784, 77)
    assert output.dtype == np.float32
    over_http = httpclient.InferInput("input", [1, 3, 360, 640], "FP32")
    over_http.set_data_from_numpy(frame)
    np.testing.assert_array_equal(
        http_client.infer("lane_detector", [over_http]).as_numpy("predict_lanes"), output
    )
    fp16 = [grpcclient.InferInput("input", [1, 3, 360, 640], "FP16")]
    fp16[0].set_data_from_numpy(frame.astype(np.float16))
    error = raised(grpc_client.infer, "lane_detector", inputs=fp16, outputs=outputs)
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert error.message() == (
        "model 'lane_detector' version 1, input 'input': expected datatype FP32, got FP16"
    )


# -- restricted protocol, limits and shutdown -------------------------------------------------


@pytest.fixture(scope="module")
def restricted(start_module_daemon, module_path):
    repository = module_path / "restricted"
    add_add_sub(repository)
    return start_module_daemon(
        repository,
        *explicit_control("*"),
        "--grpc-restricted-protocol=model-repository,statistics:admin-key=s3cret",
        "--max-request-bytes",
        "65536",
    )


def test_restricted_protocol_is_refused_as_triton_refuses_it(restricted):
    with grpcclient.InferenceServerClient(restricted.grpc_url) as client:
        for call in (client.get_model_repository_index, client.get_inference_statistics):
            error = raised(call)
            assert error.status() == "StatusCode.UNAVAILABLE"
            assert error.message() == (
                "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
            )
        wrong = {"triton-grpc-protocol-admin-key": "S3CRET"}
        assert raised(client.unload_model, "add_sub", headers=wrong).status() == (
            "StatusCode.UNAVAILABLE"
        )
        assert client.is_model_ready("add_sub")
        right = {"triton-grpc-protocol-admin-key": "s3cret"}
        names = [m.name for m in client.get_model_repository_index(headers=right).models]
        assert names == ["add_sub"]
        assert client.get_inference_statistics(headers=right).model_stats[0].name == "add_sub"
        assert client.is_server_live()
    # The gRPC groups leave HTTP alone, as in Triton.
    with httpclient.InferenceServerClient(restricted.url) as http:
        assert http.get_model_repository_index()[0]["name"] == "add_sub"


def test_message_over_max_request_bytes_is_refused_and_the_server_goes_on(restricted):
    with grpcclient.InferenceServerClient(restricted.grpc_url) as client:
        big = np.zeros((1, 16 * 1024), dtype=np.float32)
        inputs = [grpcclient.InferInput("INPUT0", [1, 16 * 1024], "FP32")]
        inputs[0].set_data_from_numpy(big)
        error = raised(client.infer, "add_sub", inputs)
        assert error.status() == "StatusCode.RESOURCE_EXHAUSTED"
        a, b, inputs = add_sub_inputs()
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + b)


def test_sigterm_ends_an_open_stream_after_its_answers_and_exits(tmp_path, start_daemon):
    add_add_sub(tmp_path / "repo")
    daemon = start_daemon(tmp_path / "repo")
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        _, _, inputs = add_sub_inputs()
        client.async_stream_infer("add_sub", inputs, request_id="before")
        result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
        assert error is None
        daemon.process.send_signal(signal.SIGTERM)
        # Well inside exit_timeout_secs (30): an idle stream does not hold shutdown.
        assert daemon.process.wait(10) == 0
        result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
        assert result is None
        assert error.message() == (
            "the server is shutting down; this stream takes no more requests"
        )
        client.stop_stream(cancel_requests=True)
