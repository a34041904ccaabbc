"""Runs the real daemon (``python -m edgebox serve``) as a child process on
127.0.0.1 for end-to-end tests: binds port 0 for HTTP, gRPC, metrics and the
dashboard, reads the bound ports from the log, waits on ``/v2/health/ready``
against a deadline, and stops with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path


def explicit_control(*loaded: str) -> list[str]:
    """Flags for explicit model control, loading ``loaded`` at start (``"*"``:
    every model in the repository, as Triton's ``--load-model=*``)."""
    return ["--model-control-mode", "explicit", *(f for m in loaded for f in ("--load-model", m))]


_LISTENING = re.compile(r"HTTP service listening on [^\s:]+:(\d+)")
_GRPC_LISTENING = re.compile(r"GRPC service listening on [^\s:]+:(\d+)")
_METRICS_LISTENING = re.compile(r"Metrics service listening on [^\s:]+:(\d+)")
_METRICS_OFF = re.compile(r"Metrics service off\b")
_DASHBOARD_LISTENING = re.compile(r"Dashboard listening on [^\s:]+:(\d+)")


def wait_for(
    predicate: Callable[[], object],
    timeout_s: float = 20.0,
    interval_s: float = 0.05,
    what: str = "condition",
):
    """Poll ``predicate`` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


class DaemonProcess:
    def __init__(
        self,
        repository: Path,
        log_path: Path,
        args: list[str],
        env: dict | None = None,
        python: str = sys.executable,
        cwd: Path | None = None,
    ):
        """``python`` and ``cwd``: another interpreter (an installed copy's
        venv) and where it starts, so the checkout is not on its path."""
        self.repository = repository
        self.python = python
        self.cwd = cwd
        self.log_path = log_path
        self.args = args
        self.env = env
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.grpc_port = 0
        self.metrics_port = 0
        self._dashboard_port = 0

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    @property
    def dashboard_port(self) -> int:
        """The dashboard's bound port, from the log (waited for on first use:
        a daemon started with ``--dashboard-enabled false`` never logs one)."""
        if not self._dashboard_port:
            self._dashboard_port = int(
                wait_for(
                    lambda: self._bound_port(_DASHBOARD_LISTENING),
                    30,
                    what=f"the dashboard to listen ({self.log_path})",
                )
            )
        return self._dashboard_port

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start(self, wait_ready: bool = True, listen_timeout_s: float = 30.0) -> DaemonProcess:
        """``listen_timeout_s``: for each port to be bound (a traced or
        profiled daemon starts several times slower)."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"the daemon is already running ({self.log_path})")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        env = {k: v for k, v in env.items() if not k.startswith("EDGEBOX_")} | (self.env or {})
        command = [
            self.python,
            "-m",
            "edgebox",
            "serve",
            "--model-repository",
            str(self.repository),
            "--host",
            "127.0.0.1",
            "--http-port",
            "0",
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
            "--dashboard-port",
            "0",
            "--dashboard-session-key-path",
            str(self.log_path.with_suffix(".session.key")),
            "--state-directory",
            str(self.log_path.with_suffix(".state")),
            "--config",
            str(self._empty_config()),
            *self.args,
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd
        )
        self.port = int(
            wait_for(self._bound_port, listen_timeout_s, what=f"the daemon to listen ({self.log_path})")
        )
        self.grpc_port = int(
            wait_for(
                lambda: self._bound_port(_GRPC_LISTENING),
                listen_timeout_s,
                what=f"the daemon to listen for gRPC ({self.log_path})",
            )
        )
        metrics = wait_for(
            self._metrics_port, listen_timeout_s, what=f"the daemon to serve metrics ({self.log_path})"
        )
        self.metrics_port = 0 if metrics == "off" else int(metrics)
        if wait_ready:
            wait_for(self.is_ready, 2 * listen_timeout_s, what="/v2/health/ready")
        return self

    def _empty_config(self) -> Path:
        path = self.log_path.with_suffix(".yaml")
        path.write_text("{}\n")
        return path

    def _bound_port(self, pattern: re.Pattern = _LISTENING) -> int | None:
        if self.process.poll() is not None:
            raise AssertionError(f"daemon exited with {self.process.returncode}:\n{self.log()}")
        match = pattern.search(self.log())
        return int(match.group(1)) if match else None

    def _metrics_port(self) -> int | str | None:
        """The bound metrics port, or "off" for a daemon started with
        ``--allow-metrics false`` (``metrics_port`` then stays 0)."""
        port = self._bound_port(_METRICS_LISTENING)
        if port is None and _METRICS_OFF.search(self.log()):
            return "off"
        return port

    def is_ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"daemon exited with {self.process.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(f"http://{self.url}/v2/health/ready", timeout=2) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> DaemonProcess:
        """Starts it unless ``start`` already did (``with daemon.start():``)."""
        running = self.process is not None and self.process.poll() is None
        return self if running else self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Stop with SIGTERM; a daemon that did not exit cleanly fails the test
        (unless the test is already failing for its own reason)."""
        code = self.stop()
        if exc_type is None:
            assert code == 0, f"daemon exited with {code}:\n{self.log()}"

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then the exit code (the caller asserts it)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(
                    f"daemon ignored SIGTERM for {timeout_s}s:\n{self.log()}"
                ) from None
        self._log.close()
        return self.process.returncode


class StartedDaemons:
    """``start(repository, *flags, wait_ready=True, env=None)`` starts a daemon
    with its log in ``folder``; ``stop_all()`` stops every one started, each of
    which must have exited 0. The ``start_daemon`` fixtures hand one out."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[DaemonProcess] = []

    def __call__(
        self, repository: Path, *args: str, wait_ready: bool = True, env: dict | None = None
    ) -> DaemonProcess:
        log_path = self.folder / f"daemon-{len(self.started)}.log"
        daemon = DaemonProcess(repository, log_path, list(args), env)
        self.started.append(daemon)
        return daemon.start(wait_ready=wait_ready)

    def stop_all(self) -> None:
        codes = [(daemon, daemon.stop()) for daemon in self.started]
        for daemon, code in codes:
            assert code == 0, f"daemon exited with {code}:\n{daemon.log()}"
