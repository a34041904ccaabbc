"""The repository API in explicit mode cannot be turned into a file read, a code
execution or a file write: the real daemon answers each hostile load of issue 9
with a precise 400, and nothing outside the repository is read, run or written.
The models it was serving keep serving."""

from __future__ import annotations

import http.client
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control
from model_fixtures import add_add_sub, add_sub_infer_inputs, add_sub_json_config, write_model

ECHO_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)]))
        return responses
"""

MARKING_MODEL = """
import pathlib

pathlib.Path({marker!r}).write_text("ran")


class TritonPythonModel:
    def execute(self, requests):
        return []
"""

VICTIM_CONFIG = """
name: "victim"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "labels.txt" } ]
"""

VICTIM = {
    "name": "victim",
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
    "output": [
        {"name": "Y", "data_type": "TYPE_FP32", "dims": [2], "label_filename": "labels.txt"}
    ],
}

ADD_SUB = add_sub_json_config()


pytestmark = pytest.mark.daemon_flags(*explicit_control("victim", "add_sub"))


@pytest.fixture(scope="module")
def repository(repository, module_path):
    """'victim' (python, with labels) and 'add_sub' (ONNX), with hostile files
    right outside the repository: a model folder at ``<repository>/..`` and a
    python file elsewhere, each leaving a marker if it is ever imported, and a
    file a write would truncate."""
    write_model(
        repository,
        "victim",
        VICTIM_CONFIG,
        {"1/model.py": ECHO_MODEL, "labels.txt": "cat\ndog\n"},
    )
    add_add_sub(repository, "add_sub")
    write_model(
        module_path,
        ".",
        'backend: "python"\n',
        {"1/model.py": MARKING_MODEL.format(marker=str(module_path / "dotdot-ran"))},
    )
    (module_path / "evil").mkdir()
    (module_path / "evil" / "model.py").write_text(
        MARKING_MODEL.format(marker=str(module_path / "evil-ran"))
    )
    (module_path / "precious.txt").write_text("precious\n")
    return repository


@pytest.fixture(scope="module")
def box(daemon, module_path):
    """The daemon in explicit mode; ``root`` is the folder around its repository."""
    daemon.root = module_path
    return daemon


@pytest.fixture
def client(http_client):
    return http_client


def refused_load(client, name: str, config: dict) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name, config=json.dumps(config))
    return info.value


def top_classes(client) -> list[str]:
    x = httpclient.InferInput("X", [2], "FP32")
    x.set_data_from_numpy(np.array([0.25, 0.75], dtype=np.float32))
    result = client.infer(
        "victim", [x], outputs=[httpclient.InferRequestedOutput("Y", class_count=2)]
    )
    return [v.decode() for v in result.as_numpy("Y")]


def assert_still_serving(client) -> None:
    assert client.is_model_ready("victim")
    assert client.is_model_ready("add_sub")
    assert top_classes(client) == ["0.750000:1:dog", "0.250000:0:cat"]


def raw_post(box, path: str, body: dict) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", box.port, timeout=30)
    try:
        connection.request(
            "POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        connection.close()


NAME_REFUSAL = (
    "model name '..': expected a single folder name (not '.' or '..', without '/' or NUL)"
)


@pytest.mark.parametrize("body", [{}, {"parameters": {"config": '{"backend": "python"}'}}])
def test_dot_dot_model_name_is_refused_and_runs_nothing(box, client, body) -> None:
    status, reply = raw_post(box, "/v2/repository/models/%2e%2e/load", body)
    assert (status, reply) == (400, {"error": NAME_REFUSAL})
    assert str(box.repository) not in reply["error"]
    assert not (box.root / "dotdot-ran").exists()
    assert_still_serving(client)


def test_dot_dot_unload_is_refused(box) -> None:
    status, reply = raw_post(box, "/v2/repository/models/%2e%2e/unload", {})
    assert (status, reply) == (400, {"error": NAME_REFUSAL})


def test_absolute_default_model_filename_is_refused_and_not_run(box, client) -> None:
    evil = box.root / "evil" / "model.py"
    error = refused_load(client, "victim", {**VICTIM, "default_model_filename": str(evil)})
    assert error.status() == "400"
    assert error.message() == (
        "failed to load 'victim', failed to poll from model repository: "
        f"load request config for 'victim': default_model_filename '{evil}' is outside the "
        "model folder"
    )
    assert not (box.root / "evil-ran").exists()
    assert_still_serving(client)


@pytest.mark.parametrize(
    "labels", ["/etc/passwd", "../../../etc/passwd", "/proc/self/environ", "../../precious.txt"]
)
def test_label_file_outside_the_model_folder_is_refused_and_never_served(
    box, client, labels
) -> None:
    output = {**VICTIM["output"][0], "label_filename": labels}
    error = refused_load(client, "victim", {**VICTIM, "output": [output]})
    assert error.status() == "400"
    assert error.message() == (
        "failed to load 'victim', failed to poll from model repository: "
        f"load request config for 'victim': output 'Y': label_filename '{labels}' is outside "
        "the model folder"
    )
    assert_still_serving(client)


def test_session_entry_that_writes_a_file_is_refused_and_the_file_is_untouched(box, client) -> None:
    target = box.root / "precious.txt"
    key = "session.collect_node_memory_stats_to_file"
    error = refused_load(
        client, "add_sub", {**ADD_SUB, "parameters": {key: {"string_value": str(target)}}}
    )
    assert error.status() == "400"
    assert error.message() == (
        "failed to load 'add_sub', failed to poll from model repository: "
        f"load request config for 'add_sub': parameter '{key}' makes ONNX Runtime read or "
        "write files, which a model config may not ask for"
    )
    ones = np.ones((1, 16), dtype=np.float32)
    result = client.infer("add_sub", add_sub_infer_inputs(httpclient, ones, ones))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2.0))
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("filename", ["/dev/zero", "/etc/shadow"])
def test_warmup_file_outside_the_warmup_folder_is_refused_unread(box, client, filename) -> None:
    warmup = {
        "name": "w",
        "batch_size": 1,
        "inputs": {"X": {"data_type": "TYPE_FP32", "dims": [2], "input_data_file": filename}},
    }
    error = refused_load(client, "victim", {**VICTIM, "model_warmup": [warmup]})
    assert error.status() == "400"
    assert error.message() == (
        "failed to load 'victim', failed to poll from model repository: "
        f"load request config for 'victim': model_warmup 'w', input 'X': input_data_file "
        f"'{filename}' is outside the model's warmup folder"
    )
    assert_still_serving(client)


def test_a_valid_override_still_loads(box, client) -> None:
    client.load_model("victim", config=json.dumps(VICTIM))
    assert_still_serving(client)
