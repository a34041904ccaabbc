"""A load request may carry the model's files (Triton's ``file:<path>``
parameters with ``config``), as NVIDIA's model control examples send them:
the real daemon in explicit mode writes them to its private override folder,
never the repository, loads and serves the model from there over HTTP and
gRPC, refuses hostile paths with 400 / INVALID_ARGUMENT before writing a
byte, caps the bytes held, audits each file, and removes the folder once
nothing serves from it."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control
from model_fixtures import add_add_sub, add_sub_infer_inputs, add_sub_json_config
from scripts.onnx_builders import build_add_sub


@pytest.fixture(scope="module")
def onnx_bytes(module_path) -> bytes:
    path = module_path / "built" / "model.onnx"
    build_add_sub(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def daemon_args(onnx_bytes) -> list[str]:
    """Room for two copies of add_sub's files, not three."""
    return [*explicit_control(), "--load-files-max-bytes", str(len(onnx_bytes) * 5 // 2)]


@pytest.fixture(scope="module")
def repository(repository):
    add_add_sub(repository)
    return repository


@pytest.fixture
def overrides(daemon) -> Path:
    return daemon.log_path.with_suffix(".state") / "override-models"


def files_below(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def config_text(name: str | None, max_batch_size: int = 8) -> str:
    return json.dumps(add_sub_json_config(name, max_batch_size))


def adds_and_subtracts(client_module, client, model: str) -> bool:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.float32)
    result = client.infer(model, add_sub_infer_inputs(client_module, a, b))
    return (result.as_numpy("OUTPUT0") == a + b).all() and (
        result.as_numpy("OUTPUT1") == a - b
    ).all()


def http_load(daemon, name: str, parameters: dict) -> tuple[int, dict]:
    body = json.dumps({"parameters": parameters}).encode()
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/repository/models/{name}/load", data=body, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, {}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def unload_everything(http_client) -> None:
    for entry in http_client.get_model_repository_index():
        http_client.unload_model(entry["name"])


@pytest.fixture(autouse=True)
def _fresh(http_client):
    yield
    unload_everything(http_client)


def test_http_load_with_files_serves_the_model_from_a_private_folder(
    daemon, http_client, repository, overrides, onnx_bytes
):
    before = files_below(repository)
    http_client.load_model(
        "adder", config=config_text("adder"), files={"file:1/model.onnx": onnx_bytes}
    )
    assert adds_and_subtracts(httpclient, http_client, "adder")
    assert files_below(repository) == before
    [written] = [p for p in overrides.rglob("model.onnx")]
    assert written.read_bytes() == onnx_bytes
    assert written.relative_to(overrides).parts[1:] == ("adder", "1", "model.onnx")
    assert stat.S_IMODE(os.stat(overrides).st_mode) == 0o700
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_grpc_load_with_files_serves_the_model(daemon, grpc_client, overrides, onnx_bytes):
    grpc_client.load_model(
        "adder_grpc", config=config_text(None), files={"file:1/model.onnx": onnx_bytes}
    )
    assert adds_and_subtracts(grpcclient, grpc_client, "adder_grpc")
    assert grpc_client.get_model_config("adder_grpc").config.name == "adder_grpc"


def test_each_file_is_audited_with_its_size_and_sha256(daemon, http_client, onnx_bytes):
    http_client.load_model(
        "audited", config=config_text(None), files={"file:1/model.onnx": onnx_bytes}
    )
    digest = hashlib.sha256(onnx_bytes).hexdigest()
    assert (
        f"Repository: load file api=http from=127.0.0.1 model=audited file=1/model.onnx "
        f"bytes={len(onnx_bytes)} sha256={digest}" in daemon.log()
    )
    assert "Repository: load api=http from=127.0.0.1 model=audited result=ok" in daemon.log()


HOSTILE_PATHS = {
    "parent": ("../escaped/1/model.onnx", "'..' is not allowed as a path component"),
    "absolute": ("/tmp/escaped.onnx", "absolute paths are not allowed"),
    "empty component": ("1//model.onnx", "empty path component"),
    "dot": ("1/./model.onnx", "'.' is not allowed as a path component"),
    "name past NAME_MAX": ("1/" + "A" * 256, "is longer than 255 bytes (NAME_MAX)"),
    "NUL": ("1/model\0.onnx", "control characters (NUL included) are not allowed"),
    "config.pbtxt": ("config.pbtxt", "comes from the 'config' parameter"),
    "leading zero version": ("01/model.onnx", "version folder '01'"),
    "version as a file": ("1", "'1' is a version folder"),
    "empty": ("", "the path is empty"),
}


@pytest.mark.parametrize("case", HOSTILE_PATHS)
def test_a_hostile_path_is_refused_before_anything_is_written(
    daemon, http_client, grpc_client, repository, overrides, tmp_path, case
):
    path, why = HOSTILE_PATHS[case]
    before = files_below(repository)
    files = {f"file:{path}": b"x", "file:1/model.onnx": b"y"}
    with pytest.raises(InferenceServerException) as over_http:
        http_client.load_model("hostile", config=config_text(None), files=files)
    with pytest.raises(InferenceServerException) as over_grpc:
        grpc_client.load_model("hostile", config=config_text(None), files=files)
    prefix = "failed to load 'hostile', failed to poll from model repository: Invalid file path"
    for raised in (over_http.value, over_grpc.value):
        assert raised.message().startswith(prefix)
        assert why in raised.message()
    assert over_http.value.status() == "400"
    assert over_grpc.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert files_below(repository) == before
    assert files_below(overrides) == set()
    assert not Path("/tmp/escaped.onnx").exists()
    assert http_client.is_server_live()


def test_files_without_config_are_refused_as_triton_does(daemon, onnx_bytes):
    status, body = http_load(
        daemon, "noconfig", {"file:1/model.onnx": base64.b64encode(onnx_bytes).decode()}
    )
    assert (status, body["error"]) == (
        400,
        "failed to load 'noconfig', failed to poll from model repository: "
        "Load parameter 'config' must be specified for model file override",
    )


@pytest.mark.parametrize(
    "value, why",
    [
        ("!!!not base64", "is not valid base64"),
        ("eA=", "is not valid base64"),
        ("eA==!", "is not valid base64"),
        (5, "must be the file's bytes as base64 text"),
    ],
)
def test_a_file_that_is_not_base64_text_over_http_is_refused(daemon, overrides, value, why):
    status, body = http_load(
        daemon, "badb64", {"config": config_text(None), "file:1/model.onnx": value}
    )
    assert status == 400
    assert body["error"].startswith(
        "failed to load 'badb64', failed to poll from model repository: "
        "load parameter 'file:1/model.onnx' "
    )
    assert why in body["error"]
    assert files_below(overrides) == set()


@pytest.mark.parametrize(
    "key, set_value, expected",
    [
        ("file:1/model.onnx", lambda p: setattr(p, "string_param", "x"), "bytes_param"),
        ("config", lambda p: setattr(p, "bytes_param", b"{}"), "string_param"),
    ],
)
def test_grpc_parameters_of_the_wrong_type_get_tritons_answer(daemon, key, set_value, expected):
    request = service_pb2.RepositoryModelLoadRequest(model_name="typed")
    request.parameters["config"].string_param = config_text(None)
    request.parameters["file:1/model.onnx"].bytes_param = b"x"
    set_value(request.parameters[key])
    with grpc.insecure_channel(daemon.grpc_url) as channel:
        call = channel.unary_unary(
            "/inference.GRPCInferenceService/RepositoryModelLoad",
            request_serializer=service_pb2.RepositoryModelLoadRequest.SerializeToString,
            response_deserializer=service_pb2.RepositoryModelLoadResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as raised:
            call(request, timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        f"invalid value type for load parameter '{key}', expected {expected}."
    )


def test_the_bytes_held_are_capped(daemon, http_client, overrides, onnx_bytes):
    too_big = {"file:1/model.onnx": onnx_bytes, "file:1/extra.bin": bytes(len(onnx_bytes) * 2)}
    with pytest.raises(InferenceServerException) as alone:
        http_client.load_model("big", config=config_text(None), files=too_big)
    assert alone.value.status() == "400"
    assert "more than load_files_max_bytes" in alone.value.message()

    files = {"file:1/model.onnx": onnx_bytes}
    http_client.load_model("first", config=config_text(None), files=files)
    http_client.load_model("second", config=config_text(None), files=files)
    with pytest.raises(InferenceServerException) as beside:
        http_client.load_model("third", config=config_text(None), files=files)
    assert beside.value.status() == "503"
    assert "unload a model loaded from files first" in beside.value.message()
    assert not http_client.is_model_ready("third")

    http_client.load_model("first", config=config_text(None), files=files)
    assert http_client.is_model_ready("first")
    http_client.unload_model("second")
    http_client.load_model("third", config=config_text(None), files=files)
    assert http_client.is_model_ready("third")
    assert len(list(overrides.rglob("model.onnx"))) == 2


def test_a_plain_load_goes_back_to_the_repository_folder(
    daemon, http_client, overrides, onnx_bytes
):
    http_client.load_model(
        "add_sub", config=config_text(None, 4), files={"file:1/model.onnx": onnx_bytes}
    )
    assert http_client.get_model_config("add_sub")["max_batch_size"] == 4
    assert files_below(overrides)
    http_client.load_model("add_sub")
    assert http_client.get_model_config("add_sub")["max_batch_size"] == 8
    assert files_below(overrides) == set()
    assert adds_and_subtracts(httpclient, http_client, "add_sub")


def test_unloading_removes_the_folder_and_a_plain_load_then_finds_no_model(
    daemon, http_client, overrides, onnx_bytes
):
    http_client.load_model(
        "gone", config=config_text(None), files={"file:1/model.onnx": onnx_bytes}
    )
    http_client.unload_model("gone")
    assert files_below(overrides) == set()
    with pytest.raises(InferenceServerException) as raised:
        http_client.load_model("gone")
    assert raised.value.message().startswith(
        "failed to load 'gone', failed to poll from model repository"
    )


def test_a_load_that_fails_keeps_the_files_loaded_before(
    daemon, http_client, overrides, onnx_bytes
):
    http_client.load_model(
        "kept", config=config_text(None), files={"file:1/model.onnx": onnx_bytes}
    )
    before = files_below(overrides)
    with pytest.raises(InferenceServerException) as raised:
        http_client.load_model(
            "kept", config=config_text(None), files={"file:1/model.onnx": b"not onnx"}
        )
    assert raised.value.message().startswith("load failed for model 'kept'")
    assert adds_and_subtracts(httpclient, http_client, "kept")
    assert files_below(overrides) == before


def test_a_load_with_files_is_behind_the_control_apis_rules(
    start_daemon, repository, tmp_path, onnx_bytes
):
    daemon = start_daemon(
        repository,
        *explicit_control(),
        "--http-restricted-api",
        "model-repository:admin-key=s3cret-value",
    )
    overrides = daemon.log_path.with_suffix(".state") / "override-models"
    files = {"file:1/model.py": b"import os\nos.system('touch /tmp/pwned')\n"}
    with httpclient.InferenceServerClient(daemon.url) as client:
        with pytest.raises(InferenceServerException) as raised:
            client.load_model("intruder", config=config_text(None), files=files)
        assert raised.value.status() == "403"
        assert "Repository: load file" not in daemon.log()
        assert files_below(overrides) == set()
        client.load_model(
            "allowed",
            config=config_text(None),
            files={"file:1/model.onnx": onnx_bytes},
            headers={"admin-key": "s3cret-value"},
        )
        assert adds_and_subtracts(httpclient, client, "allowed")


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_model_control_examples_steps_pass(daemon, http_client, grpc_client, transport):
    """NVIDIA's simple_{http,grpc}_model_control.py, step by step on add_sub:
    load, an override that is not JSON refused with "failed to load", one
    that is changes max_batch_size, unload, a file path component past
    NAME_MAX refused with "Invalid file path" while the server stays live,
    and a model that does not exist refused with "failed to load". (The
    gRPC example reads that text from ``e.status()``, where tritonclient
    puts the status code: the check fails against any server, Triton's too,
    so the text is read from the message here.)"""
    client = http_client if transport == "http" else grpc_client
    client.load_model("add_sub")
    assert client.is_model_ready("add_sub")
    with pytest.raises(InferenceServerException) as bad_config:
        client.load_model("add_sub", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert "failed to load" in bad_config.value.message()
    client.load_model("add_sub", config='{"max_batch_size":"16"}')
    config = client.get_model_config("add_sub")
    max_batch_size = (
        config["max_batch_size"] if transport == "http" else config.config.max_batch_size
    )
    assert max_batch_size == 16
    client.unload_model("add_sub")
    assert not client.is_model_ready("add_sub")
    with pytest.raises(InferenceServerException) as long_name:
        client.load_model("add_sub", config="{}", files={"file:" + "A" * 256: b"a"})
    assert "Invalid file path" in long_name.value.message()
    assert client.is_server_live()
    with pytest.raises(InferenceServerException) as missing:
        client.load_model("wrong_model_name")
    assert "failed to load" in missing.value.message()
