"""The differential test's two servers: a real Triton 2.51
(scripts/triton_reference.py) and edgebox, each on its own copy of the same
python/ensemble repository. Opt-in: ``make test-parity`` (it installs the
reference, 400 MB) or ``EDGEBOX_PARITY=1`` with ``EDGEBOX_TRITON_HOME``
pointing at an installed one."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon_process import DaemonProcess, explicit_control, wait_for
from parity_repository import write_parity_repository
from scripts.triton_reference import DEFAULT_HOME, Reference

ENABLED = os.environ.get("EDGEBOX_PARITY") == "1"


def pytest_collection_modifyitems(config, items):
    if ENABLED:
        return
    skip = pytest.mark.skip(reason="opt-in: make test-parity (or EDGEBOX_PARITY=1)")
    for item in items:
        if "tests/parity/" in str(item.fspath):
            item.add_marker(skip)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    return write_parity_repository(tmp_path_factory.mktemp("parity") / "source")


@dataclass(frozen=True)
class Server:
    url: str
    """``host:port`` of its HTTP endpoint."""
    metrics_url: str


@pytest.fixture(scope="module")
def triton_flags() -> list[str]:
    """Flags after the reference Triton's usual ones; a module overrides it
    (``--cache-config local,size=N``)."""
    return []


@pytest.fixture(scope="module")
def edgebox_flags() -> list[str]:
    """Flags after edgebox's ``--model-control-mode none``; a module overrides it."""
    return []


@pytest.fixture(scope="module")
def triton_server(repository, tmp_path_factory, triton_flags) -> Server:
    reference = Reference(Path(os.environ.get("EDGEBOX_TRITON_HOME", DEFAULT_HOME)))
    if not reference.installed():
        pytest.fail("the reference Triton is not installed: run `make test-parity`")
    folder = tmp_path_factory.mktemp("triton")
    served = folder / "models"
    shutil.copytree(repository, served)
    http, grpc, metrics = free_port(), free_port(), free_port()
    process = reference.launch(served, http, grpc, metrics, folder / "triton.log", triton_flags)
    url = f"127.0.0.1:{http}"
    try:
        wait_for(lambda: process.poll() is None and answers(url), 60, what="the reference Triton")
        yield Server(url, f"127.0.0.1:{metrics}")
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def triton(triton_server) -> str:
    """``host:port`` of the reference Triton's HTTP endpoint."""
    return triton_server.url


@pytest.fixture(scope="module")
def edgebox_server(repository, tmp_path_factory, edgebox_flags) -> Server:
    """edgebox started as Triton is (every model at start, no model control)."""
    folder = tmp_path_factory.mktemp("edgebox")
    served = folder / "models"
    shutil.copytree(repository, served)
    flags = ["--model-control-mode", "none", *edgebox_flags]
    with DaemonProcess(served, folder / "daemon.log", flags) as daemon:
        yield Server(daemon.url, daemon.metrics_url)


@pytest.fixture(scope="module")
def edgebox(edgebox_server) -> str:
    """``host:port`` of edgebox's HTTP endpoint."""
    return edgebox_server.url


@pytest.fixture(scope="module")
def explicit_servers(repository, tmp_path_factory):
    """``{"triton": (http, grpc), "edgebox": (http, grpc)}``: both servers in
    explicit mode (nothing loaded at start) on copies of ``repository``."""
    reference = Reference(Path(os.environ.get("EDGEBOX_TRITON_HOME", DEFAULT_HOME)))
    if not reference.installed():
        pytest.fail("the reference Triton is not installed: run `make test-parity`")
    folder = tmp_path_factory.mktemp("both")
    shutil.copytree(repository, folder / "triton")
    shutil.copytree(repository, folder / "edgebox")
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    process = reference.launch(
        folder / "triton",
        http,
        grpc_port,
        metrics,
        folder / "triton.log",
        ("--model-control-mode", "explicit"),
    )
    url = f"127.0.0.1:{http}"
    try:
        wait_for(lambda: process.poll() is None and answers(url), 60, what="the reference Triton")
        with DaemonProcess(folder / "edgebox", folder / "edgebox.log", explicit_control()) as ebx:
            yield {"triton": (url, f"127.0.0.1:{grpc_port}"), "edgebox": (ebx.url, ebx.grpc_url)}
    finally:
        process.terminate()
        process.wait(30)
