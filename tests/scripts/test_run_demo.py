"""`make run`'s launcher: it starts a local mosquitto, points the daemon at it,
forwards signals to the daemon and stops the broker when the daemon exits."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

from daemon_process import wait_for
from scripts.demo_broker import LocalMosquitto
from scripts.run_demo import dashboard_banner, run_daemon

ROOT = Path(__file__).resolve().parents[2]
_BANNER = re.compile(
    r"^MQTT broker for the demo: mqtt://127\.0\.0\.1:(\d+)  "
    r"\(watch: mosquitto_sub -h 127\.0\.0\.1 -p (\d+) -t 'edgebox/#' -v\)$"
)


def test_print_only_starts_the_broker_and_shows_the_daemon_command(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "scripts/run_demo.py",
            "--repository",
            "some_repo",
            "--run-dir",
            str(tmp_path),
            "--print-only",
            "--log-verbose",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    banner, dashboard, command_line = result.stdout.splitlines()
    assert dashboard.startswith("Dashboard: http://localhost:8080 ")
    port = _BANNER.match(banner).group(1)
    assert _BANNER.match(banner).group(2) == port
    assert shlex.split(command_line)[1:] == [
        "-m",
        "edgebox",
        "serve",
        "--config",
        "etc/demo.yaml",
        "--model-repository",
        "some_repo",
        "--mqtt-url",
        f"mqtt://127.0.0.1:{port}",
        "--mqtt-spool-path",
        str(tmp_path / "mqtt-spool.sqlite"),
        "--dashboard-session-key-path",
        str(tmp_path / "dashboard-session.key"),
        "--state-directory",
        str(tmp_path / "state"),
        "--log-verbose",
        "1",
    ]
    log = (tmp_path / "mosquitto" / "mosquitto.log").read_text()
    assert f"Opening ipv4 listen socket on port {port}." in log
    assert "terminating" in log


def test_daemon_exit_status_is_returned_and_the_broker_stopped(tmp_path):
    broker = LocalMosquitto(tmp_path).start()
    code = run_daemon([sys.executable, "-c", "raise SystemExit(3)"], broker)
    assert code == 3
    assert not broker.running()


def test_sigterm_is_forwarded_to_the_daemon(tmp_path):
    ready = tmp_path / "ready"
    child = (
        "import pathlib, signal, sys\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "signal.pause()\n"
    )
    original = signal.getsignal(signal.SIGTERM)

    def terminate_when_ready() -> None:
        wait_for(
            lambda: ready.exists() and signal.getsignal(signal.SIGTERM) is not original,
            20,
            what="the child and the forwarding handler",
        )
        os.kill(os.getpid(), signal.SIGTERM)

    broker = LocalMosquitto(tmp_path / "broker").start()
    sender = threading.Thread(target=terminate_when_ready, daemon=True)
    sender.start()
    code = run_daemon([sys.executable, "-c", child], broker)
    sender.join(5)
    assert code == 7
    assert not broker.running()
    assert signal.getsignal(signal.SIGTERM) is original


def test_the_dashboard_banner_names_the_port_passed_through():
    assert dashboard_banner([]).startswith("Dashboard: http://localhost:8080 ")
    assert dashboard_banner(["--dashboard-port", "9000"]).startswith(
        "Dashboard: http://localhost:9000 "
    )
    assert dashboard_banner(["--dashboard-port=9001", "--log-verbose", "1"]).startswith(
        "Dashboard: http://localhost:9001 "
    )
