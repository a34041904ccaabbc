"""Access control against the real daemon with the official tritonclient:
``--http-restricted-api`` groups as Triton takes them, and ``api_key_file``.

The daemon only listens on 127.0.0.1 here, so what a non-loopback client gets
by default is pinned in tests/protocol/test_http_access.py; these tests rely on
explicit restrictions, which apply to every client, loopback included.
Expected statuses and texts were observed from Triton 2.51 started with the
same flag (see /work/notes/triton.md).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from cli_helpers import run_edgebox
from daemon_process import explicit_control
from model_fixtures import add_python_xy

RESTRICTED = "This API is restricted, expecting header 'admin-key'"


def xy_repository(repository: Path) -> Path:
    for name in ("xy", "never_loaded"):
        add_python_xy(repository, name)
    return repository


def api_key_file(root: Path, mode: int = 0o600) -> Path:
    path = root / "api.key"
    path.write_text("0123456789abcdef0123456789abcdef\n")
    os.chmod(path, mode)
    return path


@pytest.fixture(scope="module")
def repository(repository):
    return xy_repository(repository)


@pytest.fixture(scope="module")
def daemon_args(module_path):
    return [
        *explicit_control(),
        "--http-restricted-api",
        "model-repository,statistics:admin-key=secret",
        "--api-key-file",
        str(api_key_file(module_path)),
    ]


@pytest.fixture
def client(http_client):
    return http_client


def refusal(call) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value.status(), info.value.message()


def infer_xy(client: httpclient.InferenceServerClient) -> np.ndarray:
    x = httpclient.InferInput("X", [2], "FP32")
    x.set_data_from_numpy(np.array([1.5, -2.0], dtype=np.float32))
    return client.infer("xy", [x]).as_numpy("Y")


def test_load_model_without_the_header_is_refused_like_triton(client) -> None:
    assert refusal(lambda: client.load_model("never_loaded")) == ("403", RESTRICTED)
    wrong = {"admin-key": "wrong"}
    assert refusal(lambda: client.load_model("never_loaded", headers=wrong)) == (
        "403",
        RESTRICTED,
    )
    assert refusal(lambda: client.get_model_repository_index()) == ("403", RESTRICTED)
    assert not client.is_model_ready("never_loaded")


def test_load_model_with_the_header_loads_and_inference_stays_open(client) -> None:
    # Header names compare case-insensitively (Triton 2.51 accepts 'Admin-Key' too).
    client.load_model("xy", headers={"Admin-Key": "secret"})
    assert client.is_model_ready("xy")
    np.testing.assert_array_equal(infer_xy(client), [1.5, -2.0])
    index = client.get_model_repository_index(headers={"admin-key": "secret"})
    assert {m["name"]: m.get("state") for m in index}["xy"] == "READY"


def test_statistics_are_in_the_restricted_group(client) -> None:
    assert refusal(lambda: client.get_inference_statistics("xy")) == ("403", RESTRICTED)
    client.load_model("xy", headers={"admin-key": "secret"})
    stats = client.get_inference_statistics("xy", headers={"admin-key": "secret"})
    assert stats["model_stats"][0]["name"] == "xy"


def test_the_api_key_does_not_open_an_explicit_group(client) -> None:
    key = {"edgebox-api-key": "0123456789abcdef0123456789abcdef"}
    assert refusal(lambda: client.get_model_repository_index(headers=key)) == ("403", RESTRICTED)


def test_loopback_client_needs_no_key_for_the_default_restriction(
    tmp_path: Path, start_daemon
) -> None:
    process = start_daemon(
        xy_repository(tmp_path / "repo"),
        *explicit_control(),
        *("--api-key-file", str(api_key_file(tmp_path))),
    )
    with httpclient.InferenceServerClient(process.url) as client:
        client.load_model("xy")
        assert client.is_model_ready("xy")


def serve_and_fail(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    return run_edgebox(
        *("serve", "--config", str(config), "--model-repository", str(tmp_path)),
        *("--host", "127.0.0.1", "--http-port", "0", *flags),
    )


def test_an_api_in_two_groups_stops_startup(tmp_path: Path) -> None:
    result = serve_and_fail(
        tmp_path,
        "--http-restricted-api=model-repository:a=1",
        "--http-restricted-api=model-repository,trace:b=2",
    )
    assert result.returncode == 78
    assert result.stderr == (
        "edgebox: setting 'http_restricted_api' from --http-restricted-api: API "
        "'model-repository' is in more than one group; each API takes one header\n"
    )


def test_a_world_readable_key_file_stops_startup(tmp_path: Path) -> None:
    path = api_key_file(tmp_path, 0o644)
    result = serve_and_fail(tmp_path, "--api-key-file", str(path))
    assert result.returncode == 78
    assert result.stderr == (
        f"edgebox: setting 'api_key_file' (--api-key-file): '{path}' can be read by every "
        f"user (mode 0644); run: chmod 600 '{path}' (or 640 with the daemon's group)\n"
    )
