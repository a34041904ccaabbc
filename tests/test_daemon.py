"""The daemon under a systemd-like supervisor: the notify protocol for real,
over a datagram socket the test owns, and what the watchdog vouches for."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from daemon_process import wait_for
from edgebox.daemon import Daemon
from edgebox.dashboard.settings import DashboardSettings
from edgebox.lifecycle.states import ModelState, VersionStatus
from edgebox.settings import Settings
from fakes import blocking_gate
from model_fixtures import PYTHON_XY_CONFIG, add_add_sub, write_model


def receive_until(sock: socket.socket, wanted: str, timeout_s: float = 30) -> list[str]:
    messages: list[str] = []
    deadline = time.monotonic() + timeout_s
    while wanted not in messages:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            messages.append(sock.recv(4096).decode())
        except TimeoutError:
            raise AssertionError(f"no {wanted!r} from the daemon; got {messages}") from None
    return messages


def local_settings(tmp_path: Path, **overrides) -> Settings:
    """Loopback, free ports, and the dashboard's session key in the test's
    folder: nothing of this machine's /var/lib is touched."""
    dashboard = DashboardSettings(port=0, session_key_path=tmp_path / "session.key")
    values = dict(
        model_repository=tmp_path,
        host="127.0.0.1",
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        dashboard=dashboard,
        state_directory=tmp_path / "state",
    )
    return Settings(**{**values, **overrides})


def test_notifies_ready_feeds_watchdog_and_says_stopping(tmp_path: Path, start_daemon):
    add_add_sub(tmp_path / "repo")
    address = str(tmp_path / "notify.sock")
    supervisor = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    supervisor.bind(address)
    daemon = start_daemon(
        tmp_path / "repo",
        wait_ready=False,
        env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"},
    )
    before_ready = receive_until(supervisor, "READY=1")
    assert daemon.is_ready(), "READY=1 was sent before the server was ready"
    assert "WATCHDOG=1" not in before_ready
    receive_until(supervisor, "WATCHDOG=1")
    receive_until(supervisor, "WATCHDOG=1")
    assert daemon.stop() == 0
    assert "STOPPING=1" in receive_until(supervisor, "STOPPING=1", timeout_s=1)
    supervisor.close()


def test_watchdog_health_follows_the_accept_loop(tmp_path: Path):
    add_add_sub(tmp_path)
    daemon = Daemon(local_settings(tmp_path))
    assert not daemon.healthy()
    daemon.http.start()
    daemon.grpc.start()
    assert daemon.healthy()
    daemon.http.stop(1)
    assert not daemon.healthy()
    daemon.grpc.stop(1)


def test_watchdog_health_follows_the_grpc_server(tmp_path: Path):
    add_add_sub(tmp_path)
    daemon = Daemon(local_settings(tmp_path))
    daemon.http.start()
    daemon.grpc.start()
    assert daemon.healthy()
    daemon.grpc.stop(1)
    assert not daemon.healthy()
    daemon.http.stop(1)


SLOW_INITIALIZE = """
import triton_python_backend_utils as pb_utils
from fakes import blocking_gate


class TritonPythonModel:
    def initialize(self, args):
        blocking_gate.entered.set()
        blocking_gate.release.wait(30)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""


def test_stop_during_a_slow_initial_load_returns_within_the_exit_timeout(tmp_path: Path):
    blocking_gate.reset()
    write_model(
        tmp_path, "slow", PYTHON_XY_CONFIG.format(name="slow"), {"1/model.py": SLOW_INITIALIZE}
    )
    settings = local_settings(tmp_path, model_control_mode="none", exit_timeout_secs=1)
    daemon = Daemon(settings)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(code=daemon.run()), name="daemon")
    runner.start()
    try:
        assert blocking_gate.entered.wait(10), "the model's initialize never ran"
        started = time.monotonic()
        daemon.request_stop()
        runner.join(5)
        assert not runner.is_alive(), "run() waited for the slow load to finish"
        assert result == {"code": 0}
        assert time.monotonic() - started < 3
        assert not daemon.http.accepting
    finally:
        blocking_gate.release.set()
        runner.join(10)
    wait_for(
        lambda: daemon.registry.statuses("slow")[1].state is ModelState.UNAVAILABLE,
        10,
        what="the abandoned load to end",
    )
    assert daemon.registry.statuses("slow")[1] == VersionStatus(
        ModelState.UNAVAILABLE, "model 'slow' version 1: load cancelled: server shutting down"
    )
