"""`make run`: a local mosquitto on a free 127.0.0.1 port, then the daemon on
the demo config publishing to it.

The broker runs as an ordinary child process with its files under
``.run/mosquitto/``; the daemon spools under ``.run/``. SIGINT and SIGTERM go
to the daemon only; once it has exited (so it could publish ``offline``), the
broker is stopped, and this script exits with the daemon's status.

    python scripts/run_demo.py --repository model_repository [serve flags...]
    python scripts/run_demo.py --repository model_repository --print-only
    mosquitto_sub -h 127.0.0.1 -p PORT -t 'edgebox/#' -v
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.demo_broker import LocalMosquitto, mosquitto_installed

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = REPO_ROOT / ".run"
DEMO_CONFIG = Path("etc/demo.yaml")


def mqtt_flags(broker_url: str, run_dir: Path) -> list[str]:
    """The serve flags that point the daemon at the demo broker, and keep the
    daemon's state (spool, the dashboard's session key, rollouts) in ``run_dir``, which
    a developer without root can write."""
    return [
        "--mqtt-url",
        broker_url,
        "--mqtt-spool-path",
        str(run_dir / "mqtt-spool.sqlite"),
        "--dashboard-session-key-path",
        str(run_dir / "dashboard-session.key"),
        "--state-directory",
        str(run_dir / "state"),
    ]


DEFAULT_DASHBOARD_PORT = 8080


def dashboard_banner(extra_args: Sequence[str]) -> str:
    """Where the dashboard will be: the ``--dashboard-port`` passed through
    ``ARGS`` (the last one wins, as argparse takes it), else the default. A
    port set in a ``--config`` file is not read here; the daemon's own log
    line says where it listens."""
    port = DEFAULT_DASHBOARD_PORT
    args = list(extra_args)
    for index, arg in enumerate(args):
        value = None
        if arg == "--dashboard-port" and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith("--dashboard-port="):
            value = arg.partition("=")[2]
        if value is not None and value.isdigit():
            port = int(value)
    return (
        f"Dashboard: http://localhost:{port}  (read-only without login in the demo; "
        "load and unload need a password: docs/dashboard.md, 'edgebox passwd')"
    )


def daemon_command(
    repository: str, broker_url: str, run_dir: Path, extra_args: Sequence[str]
) -> list[str]:
    """``edgebox serve`` on the demo config; ``extra_args`` come last so a
    later ``--config`` or ``--mqtt-url`` given by the user wins."""
    return [
        sys.executable,
        "-m",
        "edgebox",
        "serve",
        "--config",
        str(DEMO_CONFIG),
        "--model-repository",
        repository,
        *mqtt_flags(broker_url, run_dir),
        *extra_args,
    ]


def broker_banner(broker: LocalMosquitto) -> str:
    return (
        f"MQTT broker for the demo: {broker.url}  "
        f"(watch: mosquitto_sub -h 127.0.0.1 -p {broker.port} -t 'edgebox/#' -v)"
    )


def run_daemon(command: Sequence[str], broker: LocalMosquitto) -> int:
    """Run ``command`` until it exits, forwarding SIGINT/SIGTERM to it, then
    stop the broker. Returns the shell-style status (128 + signal when the
    daemon died of a signal). Must be called from the main thread."""
    # Its own session: a terminal Ctrl-C reaches the daemon once, through us.
    daemon = subprocess.Popen(list(command), start_new_session=True)

    def forward(signum, frame) -> None:
        if daemon.poll() is None:
            daemon.send_signal(signum)

    previous = {
        signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        code = daemon.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        broker.stop()
    return 128 - code if code < 0 else code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description="Start a local mosquitto and the edgebox demo publishing to it; "
        "other arguments go to 'edgebox serve'."
    )
    parser.add_argument("--repository", default="model_repository")
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=RUN_DIR,
        help="where the broker's files and the daemon's MQTT spool go (default: .run/)",
    )
    parser.add_argument(
        "--print-only",
        action="store_true",
        help="start the broker, print its address and the daemon command, stop",
    )
    args, extra = parser.parse_known_args(argv)
    if not mosquitto_installed():
        print(
            "mosquitto is not installed: `make run` installs Debian's 'mosquitto' package",
            file=sys.stderr,
        )
        return 1
    broker = LocalMosquitto(args.run_dir / "mosquitto")
    try:
        broker.start()
        command = daemon_command(args.repository, broker.url, args.run_dir, extra)
        print(broker_banner(broker), flush=True)
        print(dashboard_banner(extra), flush=True)
        if args.print_only:
            print(shlex.join(command), flush=True)
            return 0
        return run_daemon(command, broker)
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
