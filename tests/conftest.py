"""Fixtures for every folder: ``start_daemon`` (the real daemon, one per call,
stopped at teardown), the ``stack`` of tests/inprocess_stack.py, and a real
mosquitto: ``mosquitto``, started once per session and shared, and
``device_id``, which keeps each test's topics, retained messages and client
ids apart from the others'. The e2e module daemons are in tests/e2e/conftest.py."""

from __future__ import annotations

import uuid

import pytest

from daemon_process import StartedDaemons
from mosquitto_broker import MosquittoBroker, SharedBroker, mosquitto_installed

pytest_plugins = ["inprocess_stack"]


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "daemon_flags(*flags): the flags of the e2e module's daemon (tests/e2e/conftest.py)",
    )
    config.addinivalue_line(
        "markers",
        "private_broker: the test stops, restarts or kills its mosquitto, so `mosquitto` "
        "is one of its own rather than the session's",
    )


@pytest.fixture
def start_daemon(tmp_path):
    """Start the real daemon on a repository; every daemon started is stopped
    at teardown and must exit with status 0."""
    daemons = StartedDaemons(tmp_path)
    yield daemons
    daemons.stop_all()


def _require_mosquitto() -> None:
    if not mosquitto_installed():
        pytest.fail(
            "mosquitto is not installed (looked on PATH and in /usr/sbin): run `make test`, "
            "which installs Debian's 'mosquitto' and 'mosquitto-clients' packages"
        )


@pytest.fixture(scope="session")
def session_mosquitto(tmp_path_factory) -> MosquittoBroker:
    """The one mosquitto the session's tests share, started for the first test that asks."""
    _require_mosquitto()
    with MosquittoBroker(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture
def mosquitto(request, tmp_path):
    """A real mosquitto (anonymous, plain MQTT) on a free 127.0.0.1 port: the
    session's (a ``SharedBroker``), where a test keeps to its own ``device_id``
    and client ids so that no retained message or session of another test
    reaches it. A test marked ``private_broker`` gets one of its own, stopped
    at teardown. Missing mosquitto fails the test: `make test` installs it."""
    if request.node.get_closest_marker("private_broker") is None:
        yield SharedBroker(request.getfixturevalue("session_mosquitto"))
        return
    _require_mosquitto()
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        yield broker


@pytest.fixture
def device_id() -> str:
    """A device id no other test uses: the first level of the test's MQTT
    topics after ``edgebox/``, and of its client ids."""
    return f"dev-{uuid.uuid4().hex[:8]}"
