"""A local mosquitto run as an ordinary child process on 127.0.0.1, for
`make run` and for the tests (tests/mosquitto_broker.py extends it).

It writes its own ``mosquitto.conf`` into a work folder (loopback listener on
a free port, persistence off, log to a file there), starts ``mosquitto -c``,
and waits against a deadline until the port accepts connections. Nothing here
needs root or touches the system's mosquitto service; as root the broker keeps
the caller's user instead of switching to ``mosquitto``, so it can still write
its log in the work folder.

    python scripts/run_demo.py --repository model_repository
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
_RUNNING = " running"
_BIND_FAILED = ("Address already in use", "Error: Unable to create listener")


def mosquitto_binary() -> str:
    """The mosquitto executable: Debian installs it in /usr/sbin, which is
    often not on an ordinary user's PATH."""
    return shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def mosquitto_installed() -> bool:
    return os.access(mosquitto_binary(), os.X_OK)


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick; another
    process may still take it before the broker binds, which start() retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class BrokerTls:
    """Files for a TLS listener; with ``require_certificate`` the broker
    refuses any client without a certificate signed by ``ca_file``."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    require_certificate: bool = True


class LocalMosquitto:
    """One mosquitto child process owned by the thread that created it.

    ``users`` (name -> password) turns anonymous access off and writes a
    password file with ``mosquitto_passwd -b``. ``restart()`` keeps the port,
    retrying while the old socket lingers. Failures raise ``RuntimeError``
    with the broker's log."""

    def __init__(
        self,
        workdir: Path,
        *,
        tls: BrokerTls | None = None,
        users: dict[str, str] | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tls = tls
        self.users = dict(users) if users else None
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.config_path = self.workdir / "mosquitto.conf"
        self.log_path = self.workdir / "mosquitto.log"
        self.console_path = self.workdir / "mosquitto.console.log"
        self.password_path = self.workdir / "passwords"

    @property
    def url(self) -> str:
        scheme = "mqtts" if self.tls else "mqtt"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalMosquitto:
        """Start on a fresh free port (or the kept one after a first start);
        returns once the port accepts TCP connections."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"mosquitto in '{self.workdir}' is already running")
        keep_port = self.port != 0
        if self.users is not None and not self.password_path.exists():
            self._write_password_file()
        deadline = time.monotonic() + timeout_s
        while True:
            if not keep_port:
                self.port = free_loopback_port()
            self._write_config()
            marks = self._log_sizes()
            self._spawn()
            outcome = self._wait_accepting(deadline, marks)
            if outcome == "accepting":
                return self
            new_text = self._log_text_since(marks)
            bind_failed = any(text in new_text for text in _BIND_FAILED)
            if not bind_failed or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mosquitto on 127.0.0.1:{self.port} did not start "
                    f"({outcome}):\n{self.log_text()}"
                )
            time.sleep(0.1)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; SIGKILL if it ignores that. Returns the exit code
        (None when it was never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_console()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: the broker vanishes without closing its connections cleanly."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_console()

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> LocalMosquitto:
        """Stop (if running) and start again on the same port."""
        self.stop()
        return self.start(timeout_s)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        """The broker's log file, then whatever it wrote to stdout/stderr
        (configuration errors go there before the log file opens); both are
        appended to across restarts."""
        parts = []
        for path in self._log_paths():
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "".join(parts)

    def __enter__(self) -> LocalMosquitto:
        return self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()

    def config_text(self) -> str:
        lines = [
            "# Written by scripts/demo_broker.py; rewritten on every start.",
            f"user {pwd.getpwuid(os.getuid()).pw_name}",
            "persistence false",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            "log_timestamp_format %Y-%m-%dT%H:%M:%S",
            f"listener {self.port} 127.0.0.1",
        ]
        if self.users is None:
            lines.append("allow_anonymous true")
        else:
            lines += ["allow_anonymous false", f"password_file {self.password_path}"]
        if self.tls is not None:
            lines += [
                f"cafile {self.tls.ca_file}",
                f"certfile {self.tls.cert_file}",
                f"keyfile {self.tls.key_file}",
                f"require_certificate {str(self.tls.require_certificate).lower()}",
            ]
        return "\n".join(lines) + "\n"

    def _write_config(self) -> None:
        self.config_path.write_text(self.config_text())

    def _write_password_file(self) -> None:
        self.password_path.unlink(missing_ok=True)
        self.password_path.touch(mode=0o600)
        for name, password in self.users.items():
            subprocess.run(
                ["mosquitto_passwd", "-b", str(self.password_path), name, password],
                check=True,
                capture_output=True,
            )

    def _spawn(self) -> None:
        self._close_console()
        self._console = open(self.console_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        # Its own session: a Ctrl-C in the terminal reaches whoever started
        # it, which stops it in order, not the broker first.
        self.process = subprocess.Popen(
            [mosquitto_binary(), "-c", str(self.config_path)],
            stdout=self._console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _log_sizes(self) -> list[int]:
        return [path.stat().st_size if path.exists() else 0 for path in self._log_paths()]

    def _log_text_since(self, marks: list[int]) -> str:
        text = []
        for path, mark in zip(self._log_paths(), marks, strict=True):
            if path.exists():
                with open(path, "rb") as log:
                    log.seek(mark)
                    text.append(log.read().decode(errors="replace"))
        return "".join(text)

    def _log_paths(self) -> tuple[Path, Path]:
        return (self.log_path, self.console_path)

    def _wait_accepting(self, deadline: float, marks: list[int]) -> str:
        """Accepting means this process logged that it runs (so the port is
        its own, not another listener's) and a TCP connect succeeds."""
        while True:
            if self.process.poll() is not None:
                self._close_console()
                return f"exited with {self.process.returncode}"
            if _RUNNING in self._log_text_since(marks) and self._connects():
                return "accepting"
            if time.monotonic() > deadline:
                self.kill()
                return "not accepting connections before the deadline"
            time.sleep(0.02)

    def _connects(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _close_console(self) -> None:
        console = getattr(self, "_console", None)
        if console is not None and not console.closed:
            console.close()
