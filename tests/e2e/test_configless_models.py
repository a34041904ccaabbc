"""Model folders without ``config.pbtxt`` served by the real daemon and used
with ``tritonclient``, as with Triton: a python model whose
``auto_complete_config`` declares its inputs and outputs, and the ONNX
``add_sub`` whose config comes from the model file. The python model's config
and metadata answers are compared with what Triton 2.51 answered for it."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient

from model_fixtures import add_add_sub, add_sub_infer_inputs
from triton_answers import (
    CONFIGLESS_PYTHON_CONFIG,
    CONFIGLESS_PYTHON_METADATA,
    CONFIGLESS_PYTHON_MODEL_PY,
)


@pytest.fixture(scope="module")
def repository(repository):
    (repository / "autopy" / "1").mkdir(parents=True)
    (repository / "autopy" / "1" / "model.py").write_text(CONFIGLESS_PYTHON_MODEL_PY)
    (add_add_sub(repository, "add_sub") / "config.pbtxt").unlink()
    return repository


@pytest.fixture
def client(http_client):
    return http_client


def test_python_model_without_config_answers_config_and_metadata_as_triton(client) -> None:
    config = client.get_model_config("autopy")
    assert {key: config[key] for key in CONFIGLESS_PYTHON_CONFIG} == CONFIGLESS_PYTHON_CONFIG
    assert client.get_model_metadata("autopy") == CONFIGLESS_PYTHON_METADATA


def test_python_model_without_config_infers_with_the_inputs_auto_complete_added(client) -> None:
    x = httpclient.InferInput("INPUT0", [4], "FP32")
    x.set_data_from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
    result = client.infer("autopy", [x], outputs=[httpclient.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [2, 4, 6, 8])


def test_onnx_model_without_config_infers_with_the_models_inputs_and_outputs(client) -> None:
    config = client.get_model_config("add_sub")
    assert (config["platform"], config["backend"]) == ("onnxruntime_onnx", "onnxruntime")
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 2.0, dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, a, b)
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
