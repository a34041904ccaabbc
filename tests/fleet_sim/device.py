"""One simulated device: a real edgebox daemon with its own repository,
state folder, MQTT spool and settings file, talking to one of the fleet's
brokers. Stopped and started again it keeps all four, as a box that was
powered off comes back with its disk; only its ports change.

Each daemon is kept light, since 20 of them share two cores in
``make test-fleet``: no dashboard, telemetry from psutil every 10 s and
none of it on MQTT, small HTTP and gRPC thread pools, python models
in-process."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from daemon_process import DaemonProcess
from fleet_sim.models import write_lane_model
from mosquitto_broker import daemon_mqtt_flags

LIGHT_FLAGS = (
    "--dashboard-enabled", "false",
    "--telemetry-source", "psutil",
    "--telemetry-interval-s", "10",
    "--telemetry-history-s", "10",
    "--telemetry-mqtt-interval-s", "0",
    "--http-thread-count", "2",
    "--grpc-thread-count", "1",
    "--python-isolation", "in_process",
    "--allow-gpu-metrics", "false",
)  # fmt: skip


@dataclass(frozen=True)
class FleetSection:
    """The device's ``fleet:`` settings (FLEET_SPEC.md); ``extra`` adds or
    overrides fields (``artifact_max_mb``, ``ca_file``)."""

    group: str
    trusted_keys: tuple[Path, ...]
    extra: dict = field(default_factory=dict)

    def settings(self, download_dir: Path) -> dict:
        return {
            "group": self.group,
            "trusted_keys": [str(path) for path in self.trusted_keys],
            "download_dir": str(download_dir),
            **self.extra,
        }


class Device:
    """``start()`` launches the daemon and waits until it is ready;
    ``stop()`` sends SIGTERM and returns its exit code. ``fleet=None`` leaves
    the ``fleet:`` section out (no agent)."""

    def __init__(
        self,
        device_id: str,
        workdir: Path,
        broker_url: str,
        *,
        fleet: FleetSection | None = None,
        poll_secs: float = 0.5,
        extra_flags: tuple[str, ...] = (),
    ) -> None:
        self.device_id = device_id
        self.workdir = Path(workdir)
        self.broker_url = broker_url
        self.fleet = fleet
        self.poll_secs = poll_secs
        self.extra_flags = tuple(extra_flags)
        self.repository = self.workdir / "repository"
        self.state_directory = self.workdir / "state"
        self.spool = self.workdir / "spool"
        self.download_dir = self.workdir / "downloads"
        self.config_path = self.workdir / "edgebox.yaml"
        self.starts = 0
        self.daemon: DaemonProcess | None = None
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_lane_model(self.repository)

    @property
    def status_topic(self) -> str:
        return f"edgebox/{self.device_id}/status"

    @property
    def running(self) -> bool:
        return self.daemon is not None and self.daemon.process.poll() is None

    @property
    def pid(self) -> int:
        return self.daemon.process.pid

    @property
    def metrics_target(self) -> str:
        """``host:port`` of its ``/metrics`` (of its last start)."""
        return self.daemon.metrics_url

    @property
    def url(self) -> str:
        return self.daemon.url

    def flags(self) -> list[str]:
        return [
            "--config", str(self._write_config()),
            "--state-directory", str(self.state_directory),
            "--model-control-mode", "poll",
            "--repository-poll-secs", str(self.poll_secs),
            *daemon_mqtt_flags(self.broker_url, self.device_id, self.spool),
            *LIGHT_FLAGS,
            *self.extra_flags,
        ]  # fmt: skip

    def _write_config(self) -> Path:
        """JSON is YAML: the settings file the daemon reads (``{}`` without
        a fleet section). The flags come after DaemonProcess's own
        ``--config``, so this file is the one read."""
        settings = {} if self.fleet is None else {"fleet": self.fleet.settings(self.download_dir)}
        self.config_path.write_text(json.dumps(settings, indent=2) + "\n")
        return self.config_path

    def start(self, wait_ready: bool = True) -> Device:
        if self.running:
            raise RuntimeError(f"device '{self.device_id}' is already running")
        self.starts += 1
        log_path = self.workdir / f"daemon-{self.starts}.log"
        self.daemon = DaemonProcess(self.repository, log_path, self.flags())
        self.daemon.start(wait_ready=wait_ready)
        return self

    def stop(self) -> int:
        """SIGTERM; the exit code (0 for a clean shutdown)."""
        return 0 if self.daemon is None else self.daemon.stop()

    def log(self) -> str:
        return "" if self.daemon is None else self.daemon.log()

    def rss_kb(self) -> int:
        """Resident memory of the running daemon (``VmRSS``), in KiB."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError(f"no VmRSS for pid {self.pid}")

    def cpu_ticks(self) -> int:
        """User + system clock ticks the running daemon used so far."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
