"""One deliberately broken model per failure, in one repository with good ones
(Triton's L0_lifecycle idea): each broken model reports its exact reason in the
repository index and the log, and the good models keep answering."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import wait_for
from model_fixtures import (
    ADD_SUB_CONFIG,
    PYTHON_XY_CONFIG,
    add_add_sub,
    add_python_xy,
    add_sub_infer_inputs,
    write_model,
)
from scripts.onnx_builders import build_add_sub

CRASHING_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] < 0:
                raise ValueError("negative input crashes this model")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)]))
        return responses
"""

HANGING_MODEL = """
import os
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]

    def execute(self, requests):
        open(os.path.join(self.folder, "entered"), "w").close()
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(self.folder, "release")):
            if time.monotonic() > deadline:
                raise TimeoutError("the test never released the hanging model")
            time.sleep(0.01)
        x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)])]
"""


@pytest.fixture(scope="module")
def repository(repository, module_path):
    add_add_sub(repository, "good_onnx")
    add_python_xy(repository, "good_python", CRASHING_MODEL)
    add_python_xy(repository, "hanging", HANGING_MODEL)

    (repository / "no_config" / "1").mkdir(parents=True)
    (repository / "no_config" / "1" / "weights.bin").write_bytes(b"\0")
    write_model(
        repository,
        "parse_error",
        'name: "parse_error"\nplatform: "onnxruntime_onnx"\ninput [ { name: "a" dims: [ 1 2 ] } ]\n',
    )
    write_model(repository, "empty_version", ADD_SUB_CONFIG.format(name="empty_version"))
    (repository / "empty_version" / "1").mkdir()
    half = write_model(repository, "half_copied", ADD_SUB_CONFIG.format(name="half_copied"))
    whole = build_add_sub(module_path / "whole.onnx").read_bytes()
    (half / "1").mkdir()
    (half / "1" / "model.onnx").write_bytes(whole[: len(whole) // 2])
    write_model(
        repository,
        "graphdef",
        """
        name: "graphdef"
        platform: "tensorflow_graphdef"
        max_batch_size: 128
        input [ { name: "input" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 299, 299, 3 ] } ]
        output [ { name: "InceptionV3/Predictions/Softmax" data_type: TYPE_FP32 dims: [ 1001 ] } ]
        """,
        {"1/model.graphdef": b"\x00"},
    )
    write_model(
        repository,
        "plan",
        """
        name: "plan"
        platform: "tensorrt_plan"
        max_batch_size: 1
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 360, 640 ] } ]
        output [ { name: "predict_lanes" data_type: TYPE_FP32 dims: [ 2784, 77 ] } ]
        """,
        {"1/model.plan": b"not really an engine"},
    )
    write_model(
        repository,
        "import_error",
        PYTHON_XY_CONFIG.format(name="import_error"),
        {"1/model.py": "import not_a_module_anywhere\n"},
    )
    write_model(
        repository,
        "wrong_dtype",
        ADD_SUB_CONFIG.format(name="wrong_dtype").replace("TYPE_FP32", "TYPE_INT32", 1),
    )
    build_add_sub(repository / "wrong_dtype" / "1" / "model.onnx")
    write_model(
        repository,
        "pipeline_on_broken",
        """
        name: "pipeline_on_broken"
        platform: "ensemble"
        max_batch_size: 8
        input [ { name: "A" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 16 ] } ]
        output [ { name: "S" data_type: TYPE_FP32 dims: [ 16 ] } ]
        ensemble_scheduling { step [ { model_name: "half_copied" model_version: -1
            input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
            output_map { key: "OUTPUT0" value: "S" } } ] }
        """,
        {"1/.keep": ""},
    )
    (repository / "stray_file.txt").write_text("not a model")
    (repository / ".hidden_model").mkdir()
    (repository / "good_onnx" / "notes").mkdir()

    return repository


@pytest.fixture
def client(http_client):
    return http_client


def reason_of(client, model: str) -> str:
    entries = [e for e in client.get_model_repository_index() if e["name"] == model]
    assert entries, f"'{model}' is not in the repository index"
    assert all(e["state"] == "UNAVAILABLE" for e in entries), entries
    return entries[-1]["reason"]


def assert_good_models_answer(client) -> None:
    a = np.ones((1, 16), dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, a, a)
    np.testing.assert_array_equal(client.infer("good_onnx", inputs).as_numpy("OUTPUT0"), a + a)
    x = httpclient.InferInput("X", [2], "FP32")
    x.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
    np.testing.assert_array_equal(client.infer("good_python", [x]).as_numpy("Y"), [1, 2])


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "no_config",
            "no_config: no config.pbtxt, and no version folder holds a model file to tell the "
            "backend from (looked for 'model.onnx', 'model.plan', 'model.py')",
        ),
        (
            "parse_error",
            'parse_error/config.pbtxt:3:31: \'input [ { name: "a" dims: [ 1 2 ] } ]\': Expected ",".',
        ),
        ("empty_version", "model 'empty_version' version 1: model file '"),
        ("half_copied", "model 'half_copied' version 1: ONNX Runtime cannot load '"),
        (
            "graphdef",
            "backend 'tensorflow' is not supported by edgebox (supported: ensemble, onnxruntime, python, tensorrt)",
        ),
        ("plan", "TensorRT is not installed (No module named 'tensorrt')"),
        ("import_error", "ModuleNotFoundError: No module named 'not_a_module_anywhere'"),
        ("wrong_dtype", "input 'INPUT0': config says TYPE_INT32, model has TYPE_FP32"),
        (
            "pipeline_on_broken",
            "ensemble step model 'half_copied' is not available: "
            "Request for unknown model: 'half_copied' has no available versions",
        ),
    ],
)
def test_broken_model_reports_reason_and_others_serve(client, daemon, model, expected):
    reason = reason_of(client, model)
    assert expected in reason
    assert f"UNAVAILABLE: {reason}" in daemon.log()
    with pytest.raises(InferenceServerException) as error:
        client.infer(
            model,
            [httpclient.InferInput("X", [2], "FP32").set_data_from_numpy(np.zeros(2, np.float32))],
        )
    # Triton 2.51: a model with no version serving is 404 "has no available versions".
    assert error.value.status() == "404"
    assert error.value.message().startswith(
        f"Request for unknown model: '{model}' has no available versions ("
    )
    assert reason in error.value.message()
    assert_good_models_answer(client)


def test_ignored_entries_are_not_models(client):
    names = {e["name"] for e in client.get_model_repository_index()}
    assert "stray_file.txt" not in names
    assert ".hidden_model" not in names
    assert client.get_model_metadata("good_onnx")["versions"] == ["1"]


def test_crashing_model_py_fails_only_that_request(client):
    x = httpclient.InferInput("X", [2], "FP32")
    x.set_data_from_numpy(np.array([-1, 2], dtype=np.float32))
    with pytest.raises(
        InferenceServerException,
        match=r"model 'good_python' version 1: execute\(\) raised ValueError: negative input crashes this model \(model.py line \d+\)",
    ) as error:
        client.infer("good_python", [x])
    assert error.value.status() == "500"
    assert_good_models_answer(client)
    stats = client.get_inference_statistics("good_python")["model_stats"][0]["inference_stats"]
    assert stats["fail"]["count"] >= 1


def test_hanging_model_does_not_block_other_models(client, daemon):
    folder = daemon.repository / "hanging"
    result: dict = {}

    def call_hanging():
        with httpclient.InferenceServerClient(daemon.url, network_timeout=60) as own:
            x = httpclient.InferInput("X", [2], "FP32")
            x.set_data_from_numpy(np.array([5, 6], dtype=np.float32))
            result["y"] = own.infer("hanging", [x]).as_numpy("Y")

    worker = threading.Thread(target=call_hanging)
    worker.start()
    try:
        wait_for(lambda: (folder / "entered").exists(), what="the hanging model to be entered")
        assert_good_models_answer(client)
        assert client.is_server_ready()
    finally:
        (folder / "release").touch()
        worker.join(30)
    np.testing.assert_array_equal(result["y"], [5, 6])
