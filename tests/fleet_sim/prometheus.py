"""Debian's ``prometheus`` as the fleet's view: it scrapes every device's
``/metrics`` once a second, the devices found through file-based service
discovery (a JSON targets file the harness rewrites as devices start on new
ports), as an operator's Prometheus would find devices from an inventory.
The device id is the ``device`` label of every series.

Started as an ordinary child process on a free 127.0.0.1 port with its
TSDB in the work folder; nothing here touches a system service."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from daemon_process import wait_for
from scripts.demo_broker import free_loopback_port

JOB = "edgebox"
START_TIMEOUT_S = 30.0
_BIND_FAILED = "address already in use"


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


class Prometheus:
    """``set_targets({device: "host:port"})`` (atomic rewrite, picked up by
    file SD within a second or two); ``query(promql)`` the instant vector as
    ``[(labels, value)]``."""

    def __init__(self, workdir: Path, scrape_interval_s: float = 1.0) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.scrape_interval_s = scrape_interval_s
        self.config_path = self.workdir / "prometheus.yml"
        self.targets_path = self.workdir / "targets.json"
        self.log_path = self.workdir / "prometheus.log"
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        interval = f"{int(self.scrape_interval_s * 1000)}ms"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "scrape_timeout": interval,
                    "file_sd_configs": [
                        {"files": [str(self.targets_path)], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        return json.dumps(config, indent=2) + "\n"

    def set_targets(self, targets: dict[str, str]) -> None:
        groups = [
            {"targets": [address], "labels": {"device": device}}
            for device, address in sorted(targets.items())
        ]
        partial = self.targets_path.with_suffix(".json.part")
        partial.write_text(json.dumps(groups, indent=2) + "\n")
        os.replace(partial, self.targets_path)

    def start(self) -> Prometheus:
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError("prometheus is not installed (Debian's 'prometheus' package)")
        if not self.targets_path.exists():
            self.set_targets({})
        self.config_path.write_text(self.config_text())
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self.port = free_loopback_port()
            mark = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._spawn(binary)
            try:
                wait_for(self._ready, max(deadline - time.monotonic(), 1), what="prometheus ready")
                return self
            except AssertionError:
                self.stop()
                if _BIND_FAILED not in self._log_since(mark) or time.monotonic() > deadline:
                    raise AssertionError(f"prometheus did not start:\n{self.log()}") from None

    def _spawn(self, binary: str) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                "--storage.tsdb.retention.time=1h",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.process.returncode}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM; the exit code (0 for a clean shutdown)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant query through ``/api/v1/query``; a failed query raises
        ``AssertionError`` with Prometheus's error."""
        address = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(address, timeout=5) as reply:
                answer = json.load(reply)
        except urllib.error.HTTPError as exc:
            raise AssertionError(
                f"query {promql!r}: {exc.read().decode(errors='replace')}"
            ) from None
        if answer.get("status") != "success":
            raise AssertionError(f"query {promql!r}: {answer}")
        return [
            (sample["metric"], float(sample["value"][1])) for sample in answer["data"]["result"]
        ]

    def by_device(self, promql: str) -> dict[str, float]:
        """``query(promql)``'s values keyed by their ``device`` label."""
        return {labels["device"]: value for labels, value in self.query(promql)}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _log_since(self, mark: int) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(mark)
            return log.read().decode(errors="replace").lower()

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()
