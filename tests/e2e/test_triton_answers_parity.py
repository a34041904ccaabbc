"""Triton 2.51's answers (tests/triton_answers.py) for a model that cannot
serve, the repository API and the server's name, as tritonclient sees them
over HTTP and gRPC from a daemon started with ``--server-name triton``."""

from __future__ import annotations

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import triton_answers
from daemon_process import explicit_control
from model_fixtures import PYTHON_XY_CONFIG, add_add_sub, write_model

FAILING_MODEL = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom")

    def execute(self, requests):
        return []
"""


pytestmark = pytest.mark.daemon_flags(*explicit_control("add_sub"), "--server-name", "triton")


@pytest.fixture(scope="module")
def repository(repository):
    add_add_sub(repository)
    write_model(repository, "broken", PYTHON_XY_CONFIG.format(name="broken"))
    (repository / "broken" / "1").mkdir()
    (repository / "broken" / "1" / "model.py").write_text(FAILING_MODEL)
    return repository


@pytest.fixture(params=["http", "grpc"])
def client(request, daemon):
    if request.param == "http":
        with httpclient.InferenceServerClient(daemon.url) as client:
            yield client
    else:
        with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
            yield client


def refusal(call, *args, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call(*args, **kwargs)
    return caught.value


def metadata_name(client) -> str:
    metadata = client.get_server_metadata()
    return metadata["name"] if isinstance(metadata, dict) else metadata.name


def test_server_name_is_triton_on_both_transports(client):
    assert metadata_name(client) == triton_answers.SERVER_NAME


def test_unknown_model_and_version_say_request_for_unknown_model(client):
    expected = triton_answers.UNKNOWN_MODEL_HTTP["metadata"][1].replace("nosuch", "nope")
    for call in (client.get_model_metadata, client.get_model_config):
        assert refusal(call, "nope").message() == expected
    assert refusal(client.get_model_metadata, "add_sub", "3").message() == (
        triton_answers.UNKNOWN_VERSION.replace("multiply", "add_sub")
    )
    assert not client.is_model_ready("nope")
    assert refusal(client.get_inference_statistics, "nope").message() == (
        triton_answers.UNKNOWN_MODEL_HTTP["stats"][1].replace("nosuch", "nope")
    )


def test_a_load_that_fails_then_no_available_versions(client):
    error = refusal(client.load_model, "broken")
    assert error.message().startswith(
        "load failed for model 'broken': version 1 is at UNAVAILABLE state: "
    )
    assert "boom" in error.message()
    error = refusal(client.get_model_metadata, "broken")
    assert error.message().startswith(triton_answers.NO_AVAILABLE_VERSION)
    assert error.status() in ("404", "StatusCode.NOT_FOUND")


def test_repository_api_texts(client):
    error = refusal(client.load_model, "nope")
    assert error.message() == (
        "failed to load 'nope', failed to poll from model repository: "
        "no model folder 'nope' in the model repository"
    )
    assert error.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    error = refusal(client.load_model, "add_sub", config="{not json")
    assert error.message().startswith(
        "failed to load 'add_sub', failed to poll from model repository: "
    )
    client.unload_model("nope")
    client.unload_model("broken")
    assert client.is_model_ready("add_sub")
