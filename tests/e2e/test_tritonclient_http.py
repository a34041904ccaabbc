"""The official tritonclient.http client against a real daemon: every endpoint
the issue names, binary and JSON tensors, FP32/FP16/INT64/BYTES."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control
from model_fixtures import add_sub_infer_inputs, add_sub_json_config, build_tritonclient_repository

pytestmark = pytest.mark.daemon_flags(*explicit_control("*"))


@pytest.fixture(scope="module")
def repository(repository):
    return build_tritonclient_repository(repository)


def _add_sub_inputs(binary: bool, batch: int = 1):
    a = np.arange(16 * batch, dtype=np.float32).reshape(batch, 16)
    b = np.full((batch, 16), 2.0, dtype=np.float32)
    return a, b, add_sub_infer_inputs(httpclient, a, b, binary_data=binary)


def test_health_and_server_metadata(http_client):
    assert http_client.is_server_live()
    assert http_client.is_server_ready()
    metadata = http_client.get_server_metadata()
    assert metadata["name"] == "edgebox"
    assert {"binary_tensor_data", "model_repository", "statistics", "model_configuration"} <= set(
        metadata["extensions"]
    )


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_add_sub_infer_binary_and_json(http_client, binary):
    a, b, inputs = _add_sub_inputs(binary, batch=3)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary),
    ]
    result = http_client.infer("add_sub", inputs, outputs=outputs, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert response["id"] == "req-7"
    assert response["model_name"] == "add_sub"
    assert response["model_version"] == "1"


def test_outputs_default_to_binary_when_none_requested(http_client):
    a, b, inputs = _add_sub_inputs(binary=True)
    result = http_client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert result.get_output("OUTPUT0")["parameters"]["binary_data_size"] == 64


def test_requested_output_subset_only(http_client):
    _, _, inputs = _add_sub_inputs(binary=True)
    result = http_client.infer(
        "add_sub", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT1")]
    )
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT1"]


def test_fp16_int64_bytes_through_python_model(http_client):
    f16 = np.array([0.5, 1.5, -2.25], dtype=np.float16)
    i64 = np.array([[1, 2], [3, 2**40]], dtype=np.int64)
    text = np.array([b"lane", b"edge box"], dtype=object)
    for binary in (True, False):
        inputs = [
            httpclient.InferInput("F16", [3], "FP16"),
            httpclient.InferInput("I64", [2, 2], "INT64"),
            httpclient.InferInput("TEXT", [2], "BYTES"),
        ]
        inputs[0].set_data_from_numpy(f16, binary_data=True)
        inputs[1].set_data_from_numpy(i64, binary_data=binary)
        inputs[2].set_data_from_numpy(text, binary_data=binary)
        outputs = [
            httpclient.InferRequestedOutput(n, binary_data=binary or n == "F16_TWICE")
            for n in ("F16_TWICE", "I64_PLUS_ONE", "TEXT_UPPER")
        ]
        result = http_client.infer("types", inputs, outputs=outputs)
        np.testing.assert_array_equal(result.as_numpy("F16_TWICE"), f16 * 2)
        np.testing.assert_array_equal(result.as_numpy("I64_PLUS_ONE"), i64 + 1)
        upper = [t if isinstance(t, bytes) else t.encode() for t in result.as_numpy("TEXT_UPPER")]
        assert upper == [b"LANE", b"EDGE BOX"]


def test_ensemble_of_onnx_and_python(http_client):
    a = np.linspace(-3, 3, 16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 0.5, dtype=np.float32)
    inputs = [
        httpclient.InferInput("A", [1, 16], "FP32"),
        httpclient.InferInput("B", [1, 16], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = http_client.infer("square_diff", inputs)
    np.testing.assert_allclose(result.as_numpy("SQUARE_DIFF"), a * a - b * b, rtol=1e-6)


def test_model_metadata_ready_and_config(http_client):
    metadata = http_client.get_model_metadata("add_sub")
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}
    assert http_client.is_model_ready("add_sub")
    assert http_client.is_model_ready("add_sub", "1")
    assert not http_client.is_model_ready("add_sub", "9")
    config = http_client.get_model_config("add_sub")
    assert config["max_batch_size"] == 8
    assert config["input"][0]["dims"] == [16]
    assert config["input"][0]["data_type"] == "TYPE_FP32"


def test_versioned_routes_pick_the_version(http_client):
    assert http_client.get_model_metadata("add_sub_v2")["versions"] == ["2"]
    _, _, inputs = _add_sub_inputs(binary=True)
    result = http_client.infer("add_sub_v2", inputs, model_version="2")
    assert result.get_response()["model_version"] == "2"
    with pytest.raises(
        InferenceServerException,
        match=r"^\[404\] Request for unknown model: 'add_sub_v2' version 1 is not found$",
    ) as error:
        http_client.infer("add_sub_v2", inputs, model_version="1")
    assert error.value.status() == "404"


def test_statistics_count_requests(http_client):
    _, _, inputs = _add_sub_inputs(binary=True)
    before = http_client.get_inference_statistics("add_sub")["model_stats"][0]
    for _ in range(3):
        http_client.infer("add_sub", inputs)
    after = http_client.get_inference_statistics("add_sub")["model_stats"][0]
    assert (
        after["inference_stats"]["success"]["count"]
        == before["inference_stats"]["success"]["count"] + 3
    )
    assert after["execution_count"] == before["execution_count"] + 3
    assert (
        after["inference_stats"]["compute_infer"]["ns"]
        > before["inference_stats"]["compute_infer"]["ns"]
    )
    every = http_client.get_inference_statistics()
    assert {"add_sub", "multiply", "square_diff"} <= {s["name"] for s in every["model_stats"]}


def test_repository_index_load_and_unload(http_client):
    index = {(e["name"], e.get("version")): e for e in http_client.get_model_repository_index()}
    assert index[("add_sub", "1")]["state"] == "READY"
    http_client.unload_model("multiply")
    assert not http_client.is_model_ready("multiply")
    index = {(e["name"], e.get("version")): e for e in http_client.get_model_repository_index()}
    assert index[("multiply", "1")]["state"] in ("UNLOADING", "UNAVAILABLE")
    http_client.load_model("multiply")
    assert http_client.is_model_ready("multiply")


def test_load_with_config_override(http_client):
    override = json.dumps(add_sub_json_config(max_batch_size=4))
    http_client.load_model("add_sub", config=override)
    assert http_client.get_model_config("add_sub")["max_batch_size"] == 4
    # As in Triton 2.51: a plain load keeps the override while the files are
    # unchanged; after an unload it reads the files again.
    http_client.load_model("add_sub")
    assert http_client.get_model_config("add_sub")["max_batch_size"] == 4
    http_client.unload_model("add_sub")
    http_client.load_model("add_sub")
    assert http_client.get_model_config("add_sub")["max_batch_size"] == 8


def test_errors_name_the_problem(http_client):
    _, _, inputs = _add_sub_inputs(binary=True)
    with pytest.raises(
        InferenceServerException, match=r"^\[404\] Request for unknown model: 'nope' is not found$"
    ) as error:
        http_client.infer("nope", inputs)
    assert error.value.status() == "404"
    wrong = httpclient.InferInput("INPUT0", [1, 16], "INT64")
    wrong.set_data_from_numpy(np.zeros((1, 16), dtype=np.int64))
    with pytest.raises(
        InferenceServerException, match="input 'INPUT0': expected datatype FP32, got INT64"
    ) as error:
        http_client.infer("add_sub", [wrong, inputs[1]])
    assert error.value.status() == "400"
    short = httpclient.InferInput("INPUT0", [1, 15], "FP32")
    short.set_data_from_numpy(np.zeros((1, 15), dtype=np.float32))
    with pytest.raises(InferenceServerException, match=r"expected shape \[-1,16\], got \[1,15\]"):
        http_client.infer("add_sub", [short, inputs[1]])
    with pytest.raises(InferenceServerException, match="batch size 9 exceeds max_batch_size 8"):
        http_client.infer("add_sub", _add_sub_inputs(binary=True, batch=9)[2])
    with pytest.raises(InferenceServerException, match="missing required input"):
        http_client.infer("add_sub", inputs[:1])
    assert http_client.is_server_ready()


def test_compressed_request_and_response(http_client):
    a, b, inputs = _add_sub_inputs(binary=True)
    for algorithm in ("gzip", "deflate"):
        result = http_client.infer(
            "add_sub",
            inputs,
            request_compression_algorithm=algorithm,
            response_compression_algorithm=algorithm,
        )
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
