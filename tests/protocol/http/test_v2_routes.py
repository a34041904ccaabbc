"""V2Handlers in process, over a real DataPlane and a small repository in
tmp_path (built the way edgebox/daemon.py builds it): routes, statuses, error
texts, statistics shapes and the classification extension."""

from __future__ import annotations

import gzip
import json
import math
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

import triton_answers
from edgebox import __version__
from edgebox.backends import BackendCatalog
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.protocol.http.infer_codec import HEADER_LENGTH
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.v2_handlers import V2Handlers
from edgebox.repository_control import RepositoryControl
from model_fixtures import ADD_SUB_CONFIG, add_add_sub, write_model
from scripts.onnx_builders import build_add_sub

LABELS = [f"class{i}" for i in range(15)]  # 16 outputs: index 15 has no label

LABELLED_CONFIG = ADD_SUB_CONFIG.replace(
    '{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}',
    '{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] label_filename: "labels.txt" }}',
)

UNBATCHED_CONFIG = ADD_SUB_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0").replace(
    "dims: [ 16 ]", "dims: [ 1, 16 ]"
)


class Server:
    """A dataplane and its handler, built like the daemon builds them."""

    def __init__(self, repository: Path, control_mode: str = "none") -> None:
        self.registry = ModelRegistry(EventBus())
        self.manager = LifecycleManager(
            repository,
            self.registry,
            BackendCatalog(),
            infer=lambda request: self.dataplane.infer(request),
            gpu_ids=[],
        )
        self.dataplane = DataPlane(self.registry)
        self.repository_control = RepositoryControl(
            self.registry, self.manager, self.dataplane.live, control_mode
        )
        self.handlers = V2Handlers(self.dataplane, self.repository_control)

    def start(self, names: list[str] | None = None) -> Server:
        self.manager.load_models(names)
        self.dataplane.mark_started()
        return self

    def stop(self) -> None:
        self.dataplane.mark_stopping()
        self.manager.unload_all(10)

    def call(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict | None = None,
        handlers: V2Handlers | None = None,
    ) -> HttpResponse:
        path, _, query = path.partition("?")
        request = HttpRequest(
            method=method,
            path=path,
            query=query,
            headers={k.lower(): v for k, v in (headers or {}).items()},
            body=memoryview(bytearray(body)),
        )
        return (handlers or self.handlers)(request)


def body_of(response: HttpResponse) -> bytes:
    return b"".join(b.tobytes() if isinstance(b, np.ndarray) else bytes(b) for b in response.body)


def json_of(response: HttpResponse):
    return json.loads(body_of(response))


def error_of(response: HttpResponse) -> str:
    assert response.content_type == "application/json"
    document = json_of(response)
    assert list(document) == ["error"]
    return document["error"]


def infer_body(batch: int = 1, outputs: list | None = None, datatype: str = "FP32") -> bytes:
    a = np.arange(16 * batch).reshape(batch, 16)
    document: dict = {
        "inputs": [
            {"name": "INPUT0", "datatype": datatype, "shape": [batch, 16], "data": a.tolist()},
            {"name": "INPUT1", "datatype": "FP32", "shape": [batch, 16], "data": a.tolist()},
        ]
    }
    if outputs is not None:
        document["outputs"] = outputs
    return json.dumps(document).encode()


def build_repository(root: Path) -> Path:
    repository = root / "repo"
    add_add_sub(repository)
    model_dir = write_model(
        repository,
        "labelled",
        LABELLED_CONFIG.format(name="labelled"),
        {"labels.txt": "\n".join(LABELS) + "\n"},
    )
    build_add_sub(model_dir / "1" / "model.onnx")
    model_dir = write_model(repository, "unbatched", UNBATCHED_CONFIG.format(name="unbatched"))
    build_add_sub(model_dir / "1" / "model.onnx")
    write_model(repository, "broken", ADD_SUB_CONFIG.format(name="broken"), {"1/model.onnx": b"x"})
    return repository


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = Server(build_repository(tmp_path_factory.mktemp("routes"))).start()
    yield started
    started.stop()


@pytest.fixture
def explicit_server(tmp_path):
    repository = tmp_path / "repo"
    add_add_sub(repository)
    add_add_sub(repository, "other")
    started = Server(repository, control_mode="explicit").start(["add_sub"])
    yield started
    started.stop()


# -- routing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/nope"),
        ("GET", "/v1/models/add_sub"),
        ("GET", "/v2/nope"),
        ("GET", "/v2/models"),
        ("GET", "/v2/health"),
        ("GET", "/v2/models/add_sub/nope"),
        ("GET", "/v2/models/add_sub/ready/extra"),
        ("GET", "/v2/models/add_sub/versions/1/nope"),
        ("POST", "/v2/repository/models/add_sub/reload"),
    ],
)
def test_unknown_path_is_404(server, method, path):
    response = server.call(method, path)
    assert response.status == 404
    assert error_of(response) == f"no endpoint {method} {path}"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v2/models/add_sub/infer"),
        ("PUT", "/v2/models/add_sub/versions/1/infer"),
        ("POST", "/v2/models/add_sub"),
        ("POST", "/v2/models/add_sub/ready"),
        ("DELETE", "/v2/models/add_sub/config"),
        ("POST", "/v2"),
        ("POST", "/v2/health/live"),
        ("POST", "/v2/health/ready"),
        ("POST", "/v2/models/stats"),
        ("GET", "/v2/repository/index"),
        ("GET", "/v2/repository/models/add_sub/load"),
        ("GET", "/v2/repository/models/add_sub/unload"),
    ],
)
def test_wrong_method_is_405(server, method, path):
    response = server.call(method, path)
    assert response.status == 405
    assert error_of(response) == f"method {method} not allowed for {path}"


def test_head_is_answered_like_get(server):
    assert server.call("HEAD", "/v2/health/ready").status == 200
    assert server.call("HEAD", "/v2/models/add_sub").status == 200
    response = server.call("HEAD", "/v2/models/add_sub/infer")
    assert response.status == 405
    assert error_of(response) == "method HEAD not allowed for /v2/models/add_sub/infer"


# -- health and metadata ---------------------------------------------------------------


def test_health_endpoints(server):
    for path in ("/v2/health/live", "/v2/health/ready"):
        response = server.call("GET", path)
        assert (response.status, body_of(response)) == (200, b"")


def test_health_follows_startup_and_shutdown(tmp_path):
    repository = tmp_path / "repo"
    add_add_sub(repository)
    server = Server(repository)
    assert server.call("GET", "/v2/health/live").status == 200
    assert server.call("GET", "/v2/health/ready").status == 503
    server.start()
    assert server.call("GET", "/v2/health/ready").status == 200
    server.stop()
    assert server.call("GET", "/v2/health/live").status == 503
    assert server.call("GET", "/v2/health/ready").status == 503


def test_server_metadata(server):
    response = server.call("GET", "/v2")
    assert response.status == 200
    document = json_of(response)
    assert document["name"] == "edgebox"
    assert document["version"] == __version__
    assert set(document["extensions"]) == {
        "classification",
        "binary_tensor_data",
        "model_repository",
        "system_shared_memory",
        "model_configuration",
        "statistics",
        "logging",
        "trace",
    }


def test_model_metadata_and_config(server):
    for path in ("/v2/models/add_sub", "/v2/models/add_sub/versions/1"):
        response = server.call("GET", path)
        assert response.status == 200
        assert json_of(response) == {
            "name": "add_sub",
            "versions": ["1"],
            "platform": "onnxruntime_onnx",
            "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]},
                {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 16]},
            ],
            "outputs": [
                {"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 16]},
                {"name": "OUTPUT1", "datatype": "FP32", "shape": [-1, 16]},
            ],
        }
    config = json_of(server.call("GET", "/v2/models/add_sub/config"))
    assert (config["name"], config["max_batch_size"]) == ("add_sub", 8)
    assert config["output"][0]["dims"] == [16]


def test_model_ready(server):
    assert server.call("GET", "/v2/models/add_sub/ready").status == 200
    assert server.call("GET", "/v2/models/add_sub/versions/1/ready").status == 200


@pytest.mark.parametrize(
    "path",
    ["/v2/models/add_sub/versions/9/ready", "/v2/models/broken/ready", "/v2/models/nope/ready"],
)
def test_model_not_ready_is_400_with_tritons_text(server, path):
    response = server.call("GET", path)
    assert (response.status, error_of(response)) == (
        triton_answers.UNKNOWN_MODEL_HTTP["ready"][0],
        triton_answers.UNKNOWN_MODEL_HTTP["ready"][1],
    )


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "endpoint"),
    [
        ("GET", "/v2/models/nope", "metadata"),
        ("GET", "/v2/models/nope/config", "config"),
        ("GET", "/v2/models/nope/stats", "stats"),
        ("GET", "/v2/models/nope/versions/1", "metadata"),
        ("POST", "/v2/models/nope/infer", "infer"),
    ],
)
def test_unknown_model_is_answered_as_triton_does(server, method, path, endpoint):
    response = server.call(method, path, infer_body() if method == "POST" else b"")
    status, message = triton_answers.UNKNOWN_MODEL_HTTP[endpoint]
    assert (response.status, error_of(response)) == (status, message.replace("nosuch", "nope"))


@pytest.mark.parametrize(
    "path", ["/v2/models/add_sub/versions/3", "/v2/models/add_sub/versions/3/config"]
)
def test_unknown_version_is_404_with_tritons_text(server, path):
    response = server.call("GET", path)
    expected = triton_answers.UNKNOWN_VERSION.replace("multiply", "add_sub")
    assert (response.status, error_of(response)) == (404, expected)
    response = server.call("POST", "/v2/models/add_sub/versions/3/infer", infer_body())
    assert (response.status, error_of(response)) == (404, expected)


def test_statistics_of_an_unknown_version_is_400_with_tritons_text(server):
    response = server.call("GET", "/v2/models/add_sub/versions/3/stats")
    assert (response.status, error_of(response)) == (
        400,
        "requested model version is not available for model 'add_sub'",
    )


def test_model_that_failed_to_load_has_no_available_versions_with_its_reason(server):
    response = server.call("POST", "/v2/models/broken/infer", infer_body())
    assert response.status == 404
    message = error_of(response)
    assert message.startswith(
        triton_answers.NO_AVAILABLE_VERSION + " (version 1 is UNAVAILABLE: model 'broken' version 1"
    )
    index = json_of(server.call("POST", "/v2/repository/index"))
    (entry,) = [e for e in index if e["name"] == "broken"]
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] and entry["reason"] in message
    for path in ("/v2/models/broken", "/v2/models/broken/config"):
        response = server.call("GET", path)
        assert (response.status, error_of(response)) == (404, message)
    response = server.call("GET", "/v2/models/broken/versions/1")
    assert response.status == 503
    assert error_of(response).startswith(triton_answers.VERSION_NOT_READY + ": UNAVAILABLE: ")


@pytest.mark.parametrize(
    ("path", "body", "headers", "message"),
    [
        (
            "/v2/models/add_sub/infer",
            infer_body(datatype="INT64"),
            {},
            "model 'add_sub' version 1, input 'INPUT0': expected datatype FP32, got INT64",
        ),
        (
            "/v2/models/add_sub/infer",
            infer_body(batch=0),
            {},
            "model 'add_sub' version 1, input 'INPUT0': batch size 0; a request carries "
            "1 to 8 items",
        ),
        (
            "/v2/models/add_sub/infer",
            infer_body(batch=9),
            {},
            "model 'add_sub' version 1, input 'INPUT0': batch size 9 exceeds max_batch_size 8",
        ),
        (
            "/v2/models/add_sub/infer",
            b"{not json",
            {},
            "model 'add_sub': request JSON is malformed: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            "/v2/models/add_sub/infer",
            infer_body(),
            {"Content-Encoding": "br"},
            "unsupported Content-Encoding 'br' (use gzip or deflate)",
        ),
        (
            "/v2/models/add_sub/infer",
            infer_body(),
            {"Content-Encoding": "deflate"},
            "request body is not valid deflate data: Error -3 while decompressing data: "
            "incorrect header check",
        ),
        (
            "/v2/models/add_sub/infer",
            infer_body(),
            {HEADER_LENGTH: "x"},
            "Inference-Header-Content-Length must be an integer, got 'x'",
        ),
    ],
    ids=["datatype", "batch-of-zero", "batch", "json", "encoding", "deflate", "header-length"],
)
def test_bad_request_is_400(server, path, body, headers, message):
    response = server.call("POST", path, body, headers)
    assert response.status == 400
    assert error_of(response) == message


# -- inference ----------------------------------------------------------------------------


def test_infer_json_and_binary(server):
    response = server.call("POST", "/v2/models/add_sub/infer", infer_body(batch=2))
    assert response.status == 200
    document = json_of(response)
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    assert (document["model_name"], document["model_version"]) == ("add_sub", "1")
    assert [o["name"] for o in document["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    assert document["outputs"][0]["shape"] == [2, 16]
    assert document["outputs"][0]["data"] == (a + a).ravel().tolist()
    assert document["outputs"][1]["data"] == [0.0] * 32

    header = json.dumps(
        {
            "id": "bin-1",
            "inputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": [2, 16],
                    "parameters": {"binary_data_size": a.nbytes},
                }
                for name in ("INPUT0", "INPUT1")
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    response = server.call(
        "POST",
        "/v2/models/add_sub/versions/1/infer",
        header + a.tobytes() + np.ones_like(a).tobytes(),
        {HEADER_LENGTH: str(len(header))},
    )
    assert response.status == 200
    assert response.content_type == "application/octet-stream"
    length = int(dict(response.headers)["Inference-Header-Content-Length"])
    raw = body_of(response)
    document = json.loads(raw[:length])
    assert document["id"] == "bin-1"
    assert document["outputs"] == [
        {
            "name": "OUTPUT0",
            "datatype": "FP32",
            "shape": [2, 16],
            "parameters": {"binary_data_size": a.nbytes},
        }
    ]
    np.testing.assert_array_equal(np.frombuffer(raw[length:], np.float32).reshape(2, 16), a + 1)


@pytest.mark.parametrize("version", ["+1", "01", "1_0", " 1", "1 ", "abc", "\u0661", "-1", "0x1"])
def test_version_segment_must_be_plain_digits(server, version):
    """Triton 2.51 routes only ``versions/[0-9]+``: "+1", "1_0", "-1" and "abc"
    answered 404 "Not Found" when asked (it serves "01" as version 1). Version
    folders never start with 0, so edgebox refuses "01" too: one spelling per
    version. int() used to read all of these but "abc" as a version number."""
    for method, path, body in (
        ("POST", f"/v2/models/add_sub/versions/{version}/infer", infer_body()),
        ("GET", f"/v2/models/add_sub/versions/{version}", b""),
        ("GET", f"/v2/models/add_sub/versions/{version}/ready", b""),
    ):
        response = server.call(method, path, body)
        assert response.status == 404
        assert error_of(response) == (
            f"model 'add_sub': no version '{version}' (versions are written in digits, "
            "without leading zeros)"
        )


def test_version_zero_is_a_version_no_model_has(server):
    response = server.call("POST", "/v2/models/add_sub/versions/0/infer", infer_body())
    assert (response.status, error_of(response)) == (
        404,
        "Request for unknown model: 'add_sub' version 0 is not found",
    )


def test_infer_on_an_unknown_model_is_refused_before_the_body_is_read(server):
    """A 109-byte BYTES request for a model that does not exist once allocated
    ~760 MB; the model is now looked up first, so not even malformed JSON is read."""
    response = server.call("POST", "/v2/models/nope/infer", b"{not json")
    assert (response.status, error_of(response)) == (
        404,
        "Request for unknown model: 'nope' is not found",
    )
    response = server.call(
        "POST", "/v2/models/broken/infer", b"\x1f\x8b junk", {"Content-Encoding": "gzip"}
    )
    assert response.status == 404
    assert error_of(response).startswith(triton_answers.NO_AVAILABLE_VERSION)


def _gzip_bomb(inflated_size: int) -> bytes:
    """gzip of ``inflated_size`` zero bytes, built without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(inflated_size >> 20)]
    parts.append(compressor.flush())
    return b"".join(parts)


def test_gzip_bomb_is_refused_with_413_without_inflating_it(server):
    limit = 1 << 20
    handlers = V2Handlers(server.dataplane, server.repository_control, max_request_bytes=limit)
    bomb = _gzip_bomb(64 << 20)
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        response = server.call(
            "POST", "/v2/models/add_sub/infer", bomb, {"Content-Encoding": "gzip"}, handlers
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status == 413
    assert error_of(response) == (
        "request body inflates past the limit of 1048576 bytes (--max-request-bytes)"
    )
    # The copy of the body, the capped output and zlib's window: far below 64 MB.
    assert peak < 4 * limit


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_body_may_inflate_up_to_the_limit_exactly(server, encoding):
    body = infer_body()
    compress = gzip.compress if encoding == "gzip" else zlib.compress
    at_limit = V2Handlers(server.dataplane, server.repository_control, max_request_bytes=len(body))
    response = server.call(
        "POST", "/v2/models/add_sub/infer", compress(body), {"Content-Encoding": encoding}, at_limit
    )
    assert response.status == 200
    below = V2Handlers(server.dataplane, server.repository_control, max_request_bytes=len(body) - 1)
    response = server.call(
        "POST", "/v2/models/add_sub/infer", compress(body), {"Content-Encoding": encoding}, below
    )
    assert (response.status, error_of(response)) == (
        413,
        f"request body inflates past the limit of {len(body) - 1} bytes (--max-request-bytes)",
    )


def test_gzip_body_of_several_members_is_inflated_whole(server):
    body = infer_body()
    half = len(body) // 2
    members = gzip.compress(body[:half]) + gzip.compress(body[half:])
    response = server.call(
        "POST", "/v2/models/add_sub/infer", members, {"Content-Encoding": "gzip"}
    )
    assert response.status == 200


@pytest.mark.parametrize(
    ("encoding", "data", "message"),
    [
        (
            "gzip",
            gzip.compress(b'{"inputs": []}')[:-6],
            "request body is not valid gzip data: it ends before the end of the stream",
        ),
        (
            "deflate",
            zlib.compress(b'{"inputs": []}')[:-3],
            "request body is not valid deflate data: it ends before the end of the stream",
        ),
        (
            "gzip",
            gzip.compress(b'{"inputs": []}') + b"junk",
            "request body is not valid gzip data: Error -3 while decompressing data: "
            "incorrect header check",
        ),
    ],
    ids=["truncated-gzip", "truncated-deflate", "gzip-trailing-junk"],
)
def test_corrupt_compressed_body_is_400(server, encoding, data, message):
    response = server.call("POST", "/v2/models/add_sub/infer", data, {"Content-Encoding": encoding})
    assert (response.status, error_of(response)) == (400, message)


def test_same_input_twice_is_refused_as_triton_does(server):
    document = json.loads(infer_body())
    document["inputs"].append(dict(document["inputs"][0]))
    response = server.call("POST", "/v2/models/add_sub/infer", json.dumps(document).encode())
    assert (response.status, error_of(response)) == (
        400,
        "model 'add_sub' version 1: input 'INPUT0' already exists in request",
    )


def test_same_output_requested_twice_is_refused(server):
    """Triton keeps one of the two silently; which ``binary_data`` or
    ``classification`` the client meant cannot be known, so edgebox asks."""
    body = infer_body(outputs=[{"name": "OUTPUT0"}, {"name": "OUTPUT0", "parameters": {}}])
    response = server.call("POST", "/v2/models/add_sub/infer", body)
    assert (response.status, error_of(response)) == (
        400,
        "model 'add_sub' version 1: output 'OUTPUT0' requested twice",
    )


def test_json_outputs_write_nan_and_infinity_as_triton_does(server):
    """Triton writes non-finite floats as the bare tokens NaN, Infinity and
    -Infinity, and reads them back (common/triton_json.h: rapidjson with
    kWriteNanAndInfFlag and kParseNanAndInfFlag, server PR #3870). Asked
    directly, Triton 2.51 answered a python model multiplying
    [Infinity,-Infinity,NaN,0.5,...] by ones with
    ``"data":[Infinity,-Infinity,NaN,0.5,...]``. tritonclient's json.loads reads
    them; a client with a strict parser asks for binary_data."""
    values = [math.inf, -math.inf, math.nan] + [0.0] * 13
    document = {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": values},
            {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
        ],
        "outputs": [{"name": "OUTPUT0"}],
    }
    response = server.call("POST", "/v2/models/add_sub/infer", json.dumps(document).encode())
    assert response.status == 200
    assert b'"data":[Infinity,-Infinity,NaN,1.0,' in body_of(response)


def test_deeply_nested_json_is_400(server):
    body = b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = server.call("POST", "/v2/models/add_sub/infer", body)
    assert (response.status, error_of(response)) == (
        400,
        "model 'add_sub': request JSON nests too deeply",
    )


# -- statistics -----------------------------------------------------------------------------

TRITON_MODEL_STATS_KEYS = {
    "name",
    "version",
    "last_inference",
    "inference_count",
    "execution_count",
    "inference_stats",
    "response_stats",
    "batch_stats",
    "memory_usage",
}
"""What Triton 2.51 sends for each model version over HTTP (asked: a python
model's answer, tests/parity/)."""
TRITON_INFERENCE_STATS_KEYS = {
    "success",
    "fail",
    "queue",
    "compute_input",
    "compute_infer",
    "compute_output",
    "cache_hit",
    "cache_miss",
}


def _check_stats_shape(entry: dict) -> None:
    assert set(entry) >= TRITON_MODEL_STATS_KEYS
    assert isinstance(entry["version"], str)
    assert set(entry["inference_stats"]) >= TRITON_INFERENCE_STATS_KEYS
    for duration in entry["inference_stats"].values():
        assert set(duration) == {"count", "ns"}
    for batch in entry["batch_stats"]:
        assert set(batch) == {"batch_size", "compute_input", "compute_infer", "compute_output"}
        for key in ("compute_input", "compute_infer", "compute_output"):
            assert set(batch[key]) == {"count", "ns"}


def test_statistics_shapes_and_counts(server):
    def stats() -> dict:
        response = server.call("GET", "/v2/models/add_sub/stats")
        assert response.status == 200
        (entry,) = json_of(response)["model_stats"]
        return entry

    before = stats()
    assert server.call("POST", "/v2/models/add_sub/infer", infer_body(batch=3)).status == 200
    assert (
        server.call("POST", "/v2/models/add_sub/infer", infer_body(datatype="INT32")).status == 400
    )
    after = stats()
    _check_stats_shape(after)
    assert (after["name"], after["version"]) == ("add_sub", "1")
    success, fail = after["inference_stats"]["success"], after["inference_stats"]["fail"]
    assert success["count"] == before["inference_stats"]["success"]["count"] + 1
    # A request the model never saw is not its failure, as Triton counts.
    assert fail["count"] == before["inference_stats"]["fail"]["count"]
    assert after["inference_count"] == before["inference_count"] + 3
    assert after["execution_count"] == before["execution_count"] + 1
    assert after["last_inference"] > 0
    assert 3 in {b["batch_size"] for b in after["batch_stats"]}

    versioned = json_of(server.call("GET", "/v2/models/add_sub/versions/1/stats"))
    assert [e["version"] for e in versioned["model_stats"]] == ["1"]

    every = json_of(server.call("GET", "/v2/models/stats"))
    assert list(every) == ["model_stats"]
    assert {(e["name"], e["version"]) for e in every["model_stats"]} == {
        ("add_sub", "1"),
        ("labelled", "1"),
        ("unbatched", "1"),
    }
    for entry in every["model_stats"]:
        _check_stats_shape(entry)


def test_statistics_of_a_model_with_no_served_version_is_400_as_in_triton(server):
    response = server.call("GET", "/v2/models/broken/stats")
    assert (response.status, error_of(response)) == (
        400,
        "requested model 'broken' is not available",
    )


# -- repository extension -------------------------------------------------------------------


def test_repository_index_lists_states_and_reasons(server):
    response = server.call("POST", "/v2/repository/index")
    assert response.status == 200
    index = {(e["name"], e.get("version")): e for e in json_of(response)}
    assert index[("add_sub", "1")] == {
        "name": "add_sub",
        "version": "1",
        "state": "READY",
        "reason": "",
    }
    assert index[("broken", "1")]["state"] == "UNAVAILABLE"
    ready = json_of(server.call("POST", "/v2/repository/index", b'{"ready": true}'))
    assert {e["name"] for e in ready} == {"add_sub", "labelled", "unbatched"}
    assert {e["state"] for e in ready} == {"READY"}


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/v2/repository/index",
            b'{"ready": 1}',
            "repository index: 'ready' must be true or false",
        ),
        (
            "/v2/repository/index",
            b"{",
            "repository index: request JSON is malformed: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("/v2/repository/index", b"[]", "repository index: request JSON must be an object"),
        (
            "/v2/repository/models/add_sub/load",
            b'{"parameters": [1]}',
            "load 'add_sub': 'parameters' must be an object",
        ),
    ],
)
def test_repository_bad_bodies_are_400(server, path, body, message):
    response = server.call("POST", path, body)
    assert response.status == 400
    assert error_of(response) == message


@pytest.mark.parametrize("action", ["load", "unload"])
def test_load_and_unload_are_refused_outside_explicit_mode(server, action):
    response = server.call("POST", f"/v2/repository/models/add_sub/{action}")
    assert response.status == 503  # as Triton 2.51 answers (tests/parity/)
    assert error_of(response) == (
        "explicit model load / unload is not allowed in model control mode 'none'; "
        "start the server with --model-control-mode explicit"
    )
    assert server.call("GET", "/v2/models/add_sub/ready").status == 200


def test_explicit_mode_unload_then_load(explicit_server):
    server = explicit_server
    assert server.call("GET", "/v2/models/other/ready").status == 400
    response = server.call("POST", "/v2/repository/models/add_sub/unload")
    assert (response.status, body_of(response)) == (200, b"")
    assert server.manager.wait_retired(10)
    assert server.call("GET", "/v2/models/add_sub/ready").status == 400
    response = server.call("POST", "/v2/models/add_sub/infer", infer_body())
    assert response.status == 404
    assert error_of(response) == (
        "Request for unknown model: 'add_sub' has no available versions "
        "(version 1 is UNAVAILABLE: unloaded)"
    )
    response = server.call("POST", "/v2/repository/models/add_sub/load", b"{}")
    assert (response.status, body_of(response)) == (200, b"")
    assert server.call("GET", "/v2/models/add_sub/ready").status == 200
    assert server.call("POST", "/v2/repository/models/other/load").status == 200
    assert server.call("GET", "/v2/models/other/ready").status == 200


def test_explicit_mode_errors(explicit_server):
    server = explicit_server
    response = server.call("POST", "/v2/repository/models/nope/unload")
    assert (response.status, body_of(response)) == (200, b"")
    response = server.call("POST", "/v2/repository/models/nope/load")
    assert response.status == 400
    assert error_of(response) == (
        "failed to load 'nope', failed to poll from model repository: "
        "no model folder 'nope' in the model repository"
    )
    response = server.call(
        "POST",
        "/v2/repository/models/add_sub/load",
        b'{"parameters": {"file:1/model.onnx": "eA=="}}',
    )
    assert response.status == 400
    assert error_of(response) == (
        "failed to load 'add_sub', failed to poll from model repository: "
        "Load parameter 'config' must be specified for model file override"
    )
    response = server.call(
        "POST",
        "/v2/repository/models/add_sub/unload",
        b'{"parameters": {"unload_dependents": "yes"}}',
    )
    assert response.status == 400
    assert error_of(response) == "unload 'add_sub': 'unload_dependents' must be true or false"
    assert server.call("GET", "/v2/models/add_sub/ready").status == 200


def test_a_load_that_fails_is_400_load_failed_for_model(explicit_server):
    write_model(
        explicit_server.manager.repository,
        "broken",
        ADD_SUB_CONFIG.format(name="broken"),
        {"1/model.onnx": b"x"},
    )
    response = explicit_server.call("POST", "/v2/repository/models/broken/load")
    assert response.status == 400
    assert error_of(response).startswith(
        "load failed for model 'broken': version 1 is at UNAVAILABLE state: "
    )


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ("{not json", "Failed to load JSON"),
        ('{"bogus_field": 1}', 'no field named "bogus_field"'),
    ],
)
def test_malformed_config_override_is_400_failed_to_poll(explicit_server, config, detail):
    body = json.dumps({"parameters": {"config": config}}).encode()
    response = explicit_server.call("POST", "/v2/repository/models/add_sub/load", body)
    assert response.status == 400
    message = error_of(response)
    prefix = triton_answers.LOAD_ANSWERS["malformed parameters.config"][1].replace(
        "multiply", "add_sub"
    )
    assert message.startswith(prefix + ": load request config for 'add_sub': ")
    assert detail in message
    assert explicit_server.call("GET", "/v2/models/add_sub/ready").status == 200


def test_unloading_a_model_that_is_not_loaded_is_a_200_no_op(explicit_server):
    for _ in range(2):
        response = explicit_server.call("POST", "/v2/repository/models/other/unload")
        assert (response.status, body_of(response)) == (200, b"")
    assert explicit_server.call("GET", "/v2/models/add_sub/ready").status == 200


def test_server_name_is_the_setting(tmp_path):
    repository = tmp_path / "repo"
    add_add_sub(repository)
    server = Server(repository)
    server.dataplane = DataPlane(server.registry, server_name="triton")
    handlers = V2Handlers(server.dataplane, server.repository_control)
    document = json_of(server.call("GET", "/v2", handlers=handlers))
    assert document["name"] == triton_answers.SERVER_NAME


# -- classification extension ----------------------------------------------------------------


def _classify(server: Server, model: str, batch: int, binary: bool = False, count=2):
    outputs = [{"name": "OUTPUT0", "parameters": {"classification": count, "binary_data": binary}}]
    return server.call("POST", f"/v2/models/{model}/infer", infer_body(batch, outputs))


def test_classification_returns_top_k_value_index_strings(server):
    response = _classify(server, "add_sub", batch=2)
    assert response.status == 200
    (output,) = json_of(response)["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("OUTPUT0", "BYTES", [2, 2])
    # OUTPUT0 = 2 * INPUT0; row 1 holds 16..31
    assert output["data"] == ["30.000000:15", "28.000000:14", "62.000000:15", "60.000000:14"]


def test_classification_adds_labels_from_label_filename(server):
    (output,) = json_of(_classify(server, "labelled", batch=1, count=3))["outputs"]
    assert output["shape"] == [1, 3]
    assert output["data"] == ["30.000000:15", "28.000000:14:class14", "26.000000:13:class13"]


def test_classification_of_an_unbatched_model(server):
    body = infer_body(1, [{"name": "OUTPUT0", "parameters": {"classification": 1}}])
    (output,) = json_of(server.call("POST", "/v2/models/unbatched/infer", body))["outputs"]
    assert (output["shape"], output["data"]) == ([1], ["30.000000:15"])


def test_classification_as_binary_bytes(server):
    response = _classify(server, "labelled", batch=1, binary=True)
    assert response.status == 200
    length = int(dict(response.headers)["Inference-Header-Content-Length"])
    raw = body_of(response)
    (output,) = json.loads(raw[:length])["outputs"]
    assert output["datatype"] == "BYTES"
    expected = [b"30.000000:15", b"28.000000:14:class14"]
    assert raw[length:] == b"".join(struct.pack("<I", len(e)) + e for e in expected)
    assert output["parameters"] == {"binary_data_size": len(raw) - length}


def test_classification_count_must_be_a_positive_integer(server):
    response = _classify(server, "add_sub", batch=1, count=-1)
    assert response.status == 400
    assert error_of(response) == (
        "model 'add_sub' version 1, output 'OUTPUT0': classification must be a positive "
        "integer, got -1"
    )


@pytest.mark.parametrize("route", ["load", "unload"])
def test_deeply_nested_json_to_the_repository_api_is_400(explicit_server, route):
    body = b'{"parameters": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = explicit_server.call("POST", f"/v2/repository/models/add_sub/{route}", body)
    assert (response.status, error_of(response)) == (
        400,
        f"{route} 'add_sub': request JSON nests too deeply",
    )


def test_deeply_nested_config_override_is_400(explicit_server):
    config = '{"name": "add_sub", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}"
    body = json.dumps({"parameters": {"config": config}}).encode()
    response = explicit_server.call("POST", "/v2/repository/models/add_sub/load", body)
    assert response.status == 400
    assert error_of(response).startswith(
        "failed to load 'add_sub', failed to poll from model repository: "
        "load request config for 'add_sub': Failed to load JSON: maximum recursion depth exceeded"
    )
    assert explicit_server.call("GET", "/v2/models/add_sub/ready").status == 200


@pytest.mark.parametrize("route", ["load", "unload"])
def test_a_model_name_longer_than_a_file_name_is_400(explicit_server, route):
    name = "x" * 256
    response = explicit_server.call("POST", f"/v2/repository/models/{name}/{route}")
    assert (response.status, error_of(response)) == (
        400,
        f"model name '{'x' * 32}...': longer than 255 bytes, the longest folder name",
    )
