"""The daemon under a systemd-like supervisor: the notify protocol for real,
over a datagram socket the test owns, and what the watchdog vouches for."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from edgebox.daemon import Daemon
from edgebox.settings import Settings
from model_fixtures import add_add_sub


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
    daemon = Daemon(Settings(model_repository=tmp_path, host="127.0.0.1", http_port=0))
    assert not daemon.healthy()
    daemon.http.start()
    assert daemon.healthy()
    daemon.http.stop(1)
    assert not daemon.healthy()
