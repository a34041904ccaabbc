from __future__ import annotations

import pytest

from daemon_process import StartedDaemons
from mosquitto_broker import MosquittoBroker, mosquitto_installed

pytest_plugins = ["inprocess_stack"]


@pytest.fixture
def start_daemon(tmp_path):
    """Start the real daemon on a repository; every daemon started is stopped
    at teardown and must exit with status 0."""
    daemons = StartedDaemons(tmp_path)
    yield daemons
    daemons.stop_all()


@pytest.fixture
def mosquitto(tmp_path):
    """A real mosquitto (anonymous, plain MQTT) on a free 127.0.0.1 port,
    stopped at teardown. Missing mosquitto fails the test: `make test` installs it."""
    if not mosquitto_installed():
        pytest.fail(
            "mosquitto is not installed (looked on PATH and in /usr/sbin): run `make test`, "
            "which installs Debian's 'mosquitto' and 'mosquitto-clients' packages"
        )
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        yield broker
