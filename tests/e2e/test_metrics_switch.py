"""A real daemon with ``--allow-metrics false`` binds no metrics port at all
and still answers inference and the dashboard; with ``--metrics-address
127.0.0.1`` and ``--host 0.0.0.0`` the metrics socket alone is on loopback.
What the daemon listens on is read from the kernel (``/proc``), not its log."""

from __future__ import annotations

import json
import os
import re
import socket
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from daemon_process import explicit_control
from model_fixtures import add_sub_infer_inputs

_SOCKET = re.compile(r"socket:\[(\d+)\]")
_TCP_LISTEN = "0A"


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """The (address, port) of every TCP socket process ``pid`` listens on;
    an IPv4-mapped IPv6 address (gRPC's dual-stack socket) as plain IPv4."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            match = _SOCKET.fullmatch(os.readlink(fd))
        except OSError:  # closed since listed
            continue
        if match:
            inodes.add(match.group(1))
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != _TCP_LISTEN or inode not in inodes:
                continue
            address_hex, port_hex = local.split(":")
            raw = bytes.fromhex(address_hex)
            # /proc prints the address as host-order 32-bit words.
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            address = socket.inet_ntop(family, words).removeprefix("::ffff:")
            found.add((address, int(port_hex, 16)))
    return found


def infer_add_sub(url: str) -> np.ndarray:
    data = np.ones((1, 16), dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, data, data)
    with httpclient.InferenceServerClient(url) as client:
        return client.infer("add_sub", inputs).as_numpy("OUTPUT0")


def test_daemon_without_metrics_binds_no_metrics_port_and_still_serves(
    add_sub_repository, start_daemon
):
    daemon = start_daemon(
        add_sub_repository,
        *explicit_control("add_sub"),
        "--allow-metrics",
        "false",
    )

    assert daemon.metrics_port == 0
    assert "Metrics service off (allow_metrics false): no metrics port bound" in daemon.log()
    assert "Metrics service listening" not in daemon.log()
    assert listening_sockets(daemon.process.pid) == {
        ("127.0.0.1", daemon.port),
        ("127.0.0.1", daemon.grpc_port),
        ("127.0.0.1", daemon.dashboard_port),
    }
    assert infer_add_sub(daemon.url).tolist() == [[2.0] * 16]
    with urllib.request.urlopen(f"{daemon.dashboard_url}/api/v1/session", timeout=10) as reply:
        assert reply.status == 200
        assert json.load(reply)["control_mode"] == "explicit"


def test_metrics_address_keeps_metrics_on_loopback_while_the_host_is_every_address(
    add_sub_repository, start_daemon
):
    daemon = start_daemon(
        add_sub_repository,
        *explicit_control("add_sub"),
        "--host",
        "0.0.0.0",
        "--metrics-address",
        "127.0.0.1",
    )

    assert (
        f"Metrics service listening on 127.0.0.1:{daemon.metrics_port} "
        "(loopback only: not reachable from other machines)"
    ) in daemon.log()
    listening = listening_sockets(daemon.process.pid)
    assert ("127.0.0.1", daemon.metrics_port) in listening
    assert ("0.0.0.0", daemon.metrics_port) not in listening
    assert ("0.0.0.0", daemon.port) in listening
    assert infer_add_sub(daemon.url).tolist() == [[2.0] * 16]
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics", timeout=5) as reply:
        assert "nv_inference_request_success" in reply.read().decode()


def test_daemon_without_metrics_tells_systemd_it_is_ready(
    tmp_path, start_daemon, add_sub_repository
):
    address = str(tmp_path / "notify.sock")
    supervisor = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    supervisor.bind(address)
    supervisor.settimeout(30)
    try:
        daemon = start_daemon(
            add_sub_repository,
            "--allow-metrics",
            "false",
            wait_ready=False,
            env={"NOTIFY_SOCKET": address},
        )
        assert supervisor.recv(4096).decode() == "READY=1"
        assert daemon.is_ready()
    finally:
        supervisor.close()
