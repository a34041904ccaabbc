"""The custom-operations tutorial's ONNX model served by the real daemon: its
``model_operations`` library, kept in the model folder, lets it load and
answer ``tritonclient`` over HTTP, through an unload and a load; the same
model without the library configured stays UNAVAILABLE with ONNX Runtime's
reason in the repository index."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient

from custom_op_models import add_inverse_model, inverse_of, random_invertible
from daemon_process import explicit_control

pytestmark = pytest.mark.daemon_flags(*explicit_control("*"))


@pytest.fixture(scope="module")
def repository(repository):
    add_inverse_model(repository, "inverse")
    add_inverse_model(repository, "inverse_without_ops", library=None)
    return repository


def infer_inverse(client, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = random_invertible(seed)
    tensor = httpclient.InferInput("x", [4], "FP32")
    tensor.set_data_from_numpy(x)
    return x, client.infer("inverse", [tensor]).as_numpy("y")


def test_custom_op_model_answers_through_an_unload_and_a_load(http_client) -> None:
    x, y = infer_inverse(http_client, seed=11)
    np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)
    http_client.unload_model("inverse")
    assert not http_client.is_model_ready("inverse")
    http_client.load_model("inverse")
    x, y = infer_inverse(http_client, seed=12)
    np.testing.assert_allclose(y, inverse_of(x), rtol=1e-5)


def test_model_without_its_library_configured_is_unavailable_with_onnx_runtimes_reason(
    http_client,
) -> None:
    entries = [
        e for e in http_client.get_model_repository_index() if e["name"] == "inverse_without_ops"
    ]
    assert [e["state"] for e in entries] == ["UNAVAILABLE"]
    assert entries[0]["reason"].endswith(
        "ai.onnx.contrib:Inverse(-1) is not a registered function/op"
    )
