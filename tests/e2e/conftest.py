"""The end-to-end tests' daemon: the real ``python -m edgebox serve`` on
127.0.0.1 (tests/daemon_process.py), started once per module on a repository
the module builds, stopped with SIGTERM after the module's last test; it must
exit 0.

A module says what its daemon serves by overriding ``repository`` (which
hands the override the module's empty repository folder), and gives the
daemon's flags with a ``daemon_flags`` mark::

    pytestmark = pytest.mark.daemon_flags(*explicit_control("add_sub"))


    @pytest.fixture(scope="module")
    def repository(repository):
        add_add_sub(repository)
        return repository

and its tests take ``daemon``, or ``http_client`` and ``grpc_client``
connected to it. Flags that name the module's own files come from an
override of ``daemon_args`` instead; variables, from one of ``daemon_env``.

A second daemon for the whole module comes from ``start_module_daemon``; a
test that stops, signals or reconfigures its daemon starts one of its own
with ``start_daemon`` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from daemon_process import DaemonProcess, StartedDaemons
from model_fixtures import add_add_sub


@pytest.fixture(scope="module")
def module_path(request, tmp_path_factory) -> Path:
    """A folder for the module's daemon: its repository, log and any file
    the module puts next to them."""
    return tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])


@pytest.fixture(scope="module")
def repository(module_path) -> Path:
    """The module's model repository, empty until the module's override fills it."""
    path = module_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def add_sub_repository(tmp_path) -> Path:
    """A repository of the test's own holding add_sub version 1, for a test
    that starts its own daemon on it."""
    repository = tmp_path / "repo"
    add_add_sub(repository)
    return repository


@pytest.fixture(scope="module")
def daemon_args(request) -> Sequence[str]:
    """The module's ``daemon_flags`` mark: flags after the ones ``DaemonProcess``
    always passes (ports 0, 127.0.0.1, an empty config)."""
    mark = request.node.get_closest_marker("daemon_flags")
    return mark.args if mark is not None else ()


@pytest.fixture(scope="module")
def daemon_env() -> dict[str, str]:
    """Variables for the daemon's environment, which keeps none of the test's
    own ``EDGEBOX_*`` variables."""
    return {}


@pytest.fixture(scope="module")
def start_module_daemon(module_path) -> StartedDaemons:
    """``start_daemon`` for daemons that serve every test of the module: each
    is stopped after the module's last test and must exit 0."""
    daemons = StartedDaemons(module_path)
    yield daemons
    daemons.stop_all()


@pytest.fixture(scope="module")
def daemon(start_module_daemon, repository, daemon_args, daemon_env) -> DaemonProcess:
    """The module's daemon, ready (``/v2/health/ready``) before the first test."""
    return start_module_daemon(repository, *daemon_args, env=daemon_env)


@pytest.fixture
def http_client(daemon) -> httpclient.InferenceServerClient:
    """tritonclient.http connected to the module's daemon, closed after the test."""
    with httpclient.InferenceServerClient(daemon.url) as client:
        yield client


@pytest.fixture
def grpc_client(daemon) -> grpcclient.InferenceServerClient:
    """tritonclient.grpc connected to the module's daemon, closed after the test."""
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        yield client
