"""Loads carrying model files (Triton's ``file:<path>`` parameters), sent to a
real Triton 2.51 and to edgebox, both in explicit mode on copies of one
python repository; what a client reads compared. Differences edgebox keeps
on purpose are in ``DELIBERATE``, with their reason (docs/http_api.md lists
them too)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import grpc
import pytest
from tritonclient.grpc import service_pb2

import triton_answers
from parity_repository import ADD_SUB

CONFIG = {
    "backend": "python",
    "max_batch_size": 8,
    "input": [{"name": f"INPUT{i}", "data_type": "TYPE_FP32", "dims": [16]} for i in (0, 1)],
    "output": [{"name": f"OUTPUT{i}", "data_type": "TYPE_FP32", "dims": [16]} for i in (0, 1)],
    "instance_group": [{"kind": "KIND_CPU", "count": 1}],
}
MODEL_PY = base64.b64encode(ADD_SUB.encode()).decode()


CASES = {
    "files without config": {"file:1/model.py": MODEL_PY},
    "'..' leaving the folder": {"config": json.dumps(CONFIG), "file:../x/model.py": MODEL_PY},
    "'..' staying inside": {"config": json.dumps(CONFIG), "file:1/../1/model.py": MODEL_PY},
    "empty component": {"config": json.dumps(CONFIG), "file:1//model.py": MODEL_PY},
    "absolute path": {"config": json.dumps(CONFIG), "file:/tmp/parity-abs.py": MODEL_PY},
    "config naming another model": {
        "config": json.dumps(CONFIG | {"name": "other"}),
        "file:1/model.py": MODEL_PY,
    },
    "no version folder": {"config": json.dumps(CONFIG), "file:labels.txt": MODEL_PY},
    "a path both file and folder": {
        "config": json.dumps(CONFIG),
        "file:1": MODEL_PY,
        "file:1/model.py": MODEL_PY,
    },
    "file value not a string": {"config": json.dumps(CONFIG), "file:1/model.py": 5},
}

STRICTER = "edgebox refuses a path that is not a plain name inside the folder (docs/http_api.md)"
DELIBERATE = {
    "files without config": "400, not 500: the request is the mistake (as for any poll failure)",
    "'..' leaving the folder": "400, not 500, as above",
    "config naming another model": "400, not 500, as above",
    "a path both file and folder": "400, not 500, as above",
    "'..' staying inside": STRICTER,
    "empty component": STRICTER,
    "absolute path": STRICTER,
    "file value not a string": "400 with the parameter named, not a 500 parser error",
}


def post(url: str, path: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{url}{path}", data=json.dumps(body).encode(), method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, ""
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()).get("error", "")


def max_batch_size(url: str, model: str) -> int:
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/config", timeout=30) as reply:
        return json.loads(reply.read())["max_batch_size"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    root = tmp_path_factory.mktemp("files") / "models"
    (root / "add_sub_py" / "1").mkdir(parents=True)
    (root / "add_sub_py" / "config.pbtxt").write_text(
        'name: "add_sub_py"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [16] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [16] },'
        ' { name: "OUTPUT1" data_type: TYPE_FP32 dims: [16] }]\n'
        "instance_group [{ kind: KIND_CPU count: 1 }]\n"
    )
    (root / "add_sub_py" / "1" / "model.py").write_text(ADD_SUB)
    return root


def visible(status: int, error: str) -> tuple[int, str]:
    """What a client acts on: the status and Triton's words, without the
    reason edgebox puts after them."""
    if error.startswith("failed to load"):
        error = error.split(",")[0]
    elif error.startswith("load failed"):
        error = error.split(":")[0]
    return status, error


def test_bad_file_loads_against_triton(explicit_servers):
    servers = explicit_servers
    differences = []
    for case, parameters in CASES.items():
        triton = post(
            servers["triton"][0], "/v2/repository/models/fresh/load", {"parameters": parameters}
        )
        edgebox = post(
            servers["edgebox"][0], "/v2/repository/models/fresh/load", {"parameters": parameters}
        )
        for url, _ in servers.values():
            post(url, "/v2/repository/models/fresh/unload", {})
        assert triton == triton_answers.FILE_LOAD_ANSWERS_HTTP[case], case
        if visible(*triton) != visible(*edgebox) and case not in DELIBERATE:
            differences.append(f"{case}: triton {triton!r}, edgebox {edgebox!r}")
        if case in DELIBERATE and visible(*triton) == visible(*edgebox):
            differences.append(f"{case}: listed as deliberate but both answer {triton!r}")
        assert edgebox[0] == 400, case
    assert not differences, "\n".join(differences)


def test_a_plain_load_after_files_goes_back_to_the_repository_on_both(explicit_servers):
    servers = explicit_servers
    files = {"file:1/model.py": MODEL_PY}
    steps = {
        "load": {},
        "load with files, config max_batch_size 4": files
        | {"config": json.dumps(CONFIG | {"max_batch_size": 4})},
        "load with config override max_batch_size 2": {
            "config": json.dumps(CONFIG | {"max_batch_size": 2})
        },
    }
    for name, (url, _) in servers.items():
        seen = []
        for step, _ in triton_answers.FILE_LOAD_SCENARIO:
            assert (
                post(url, "/v2/repository/models/add_sub_py/load", {"parameters": steps[step]})[0]
                == 200
            )
            seen.append((step, max_batch_size(url, "add_sub_py")))
        assert seen == triton_answers.FILE_LOAD_SCENARIO, name


@pytest.mark.parametrize(
    "key, value, expected",
    [("file:1/model.py", "text", "bytes_param"), ("config", b"{}", "string_param")],
)
def test_grpc_parameter_types_are_refused_alike(explicit_servers, key, value, expected):
    servers = explicit_servers
    request = service_pb2.RepositoryModelLoadRequest(model_name="fresh")
    request.parameters["config"].string_param = json.dumps(CONFIG)
    request.parameters["file:1/model.py"].bytes_param = ADD_SUB.encode()
    if isinstance(value, bytes):
        request.parameters[key].bytes_param = value
    else:
        request.parameters[key].string_param = value
    seen = []
    for _, url in servers.values():
        with grpc.insecure_channel(url) as channel:
            call = channel.unary_unary(
                "/inference.GRPCInferenceService/RepositoryModelLoad",
                request_serializer=service_pb2.RepositoryModelLoadRequest.SerializeToString,
                response_deserializer=service_pb2.RepositoryModelLoadResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as raised:
                call(request, timeout=60)
        seen.append((raised.value.code(), raised.value.details()))
    expected_answer = (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"invalid value type for load parameter '{key}', expected {expected}.",
    )
    assert seen == [expected_answer, expected_answer]
