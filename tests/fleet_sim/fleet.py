"""The whole simulation: the brokers (main, and a site broker bridged to
it), the artifact server, N devices (the last ``site_devices`` of them on
the site broker, the rest on the main one) and, where Debian's prometheus
is installed, Prometheus scraping them all.

Devices start in parallel (each start is mostly waiting for a child
process), and stop in parallel; a fleet whose device did not exit 0 fails
its teardown."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from artifact_server import ArtifactServer

from fleet_sim.brokers import Brokers
from fleet_sim.device import Device, FleetSection
from fleet_sim.prometheus import Prometheus, prometheus_binary


@dataclass(frozen=True)
class Footprint:
    """What the running devices cost the machine, for bench/RESULTS.md."""

    devices: int
    started_in_s: float
    """From the first daemon launched to the last one ready, all started at once."""
    rss_total_mb: float
    rss_max_mb: float
    idle_cpu_percent: float
    """All devices together over the window, in % of one core."""

    def line(self) -> str:
        return (
            f"{self.devices} devices: ready in {self.started_in_s:.1f} s, "
            f"RSS {self.rss_total_mb:.0f} MB in all (at most {self.rss_max_mb:.0f} MB each), "
            f"idle CPU {self.idle_cpu_percent:.1f}% of one core"
        )


class Fleet:
    """``fleet_section(device_id)`` gives each device its ``fleet:`` settings
    (None: no agent). ``started_in_s`` is how long the devices took to be
    ready, all together."""

    def __init__(
        self,
        workdir: Path,
        size: int,
        *,
        site_devices: int = 2,
        fleet_section: Callable[[str], FleetSection | None] = lambda device_id: None,
        with_prometheus: bool | None = None,
    ) -> None:
        if not 0 <= site_devices <= size:
            raise ValueError(f"site_devices: expected 0..{size}, got {site_devices}")
        self.workdir = Path(workdir)
        self.size = size
        self.site_devices = site_devices
        self.fleet_section = fleet_section
        self.brokers = Brokers(self.workdir / "brokers")
        self.artifacts = ArtifactServer(self.workdir / "artifacts")
        self.artifacts.root.mkdir(parents=True, exist_ok=True)
        if with_prometheus is None:
            with_prometheus = prometheus_binary() is not None
        self.prometheus = Prometheus(self.workdir / "prometheus") if with_prometheus else None
        self.devices: list[Device] = []
        self.started_in_s = 0.0

    def device(self, device_id: str) -> Device:
        return next(d for d in self.devices if d.device_id == device_id)

    @property
    def site(self) -> list[Device]:
        """The devices behind the site broker."""
        return [d for d in self.devices if d.broker_url == self.brokers.site.url]

    def start(self) -> Fleet:
        self.brokers.start()
        self.artifacts.start()
        if self.prometheus is not None:
            self.prometheus.start()
        first_site = self.size - self.site_devices
        for index in range(self.size):
            device_id = f"sim-{index:02d}"
            broker = self.brokers.site if index >= first_site else self.brokers.main
            self.devices.append(
                Device(
                    device_id,
                    self.workdir / "devices" / device_id,
                    broker.url,
                    fleet=self.fleet_section(device_id),
                )
            )
        began = time.monotonic()
        self._each(Device.start, self.devices)
        self.started_in_s = time.monotonic() - began
        self._publish_targets()
        return self

    def start_device(self, device: Device) -> None:
        """Start a stopped device again; Prometheus follows it to its new port."""
        device.start()
        self._publish_targets()

    def stop_device(self, device: Device) -> None:
        """SIGTERM; a device that does not exit 0 fails the caller. Prometheus
        keeps scraping its last address, so the fleet's view shows it down."""
        code = device.stop()
        assert code == 0, f"{device.device_id} exited with {code}:\n{device.log()}"

    def footprint(self, window_s: float = 5.0) -> Footprint:
        """Memory now, and the CPU the running devices use while nothing is
        asked of them over ``window_s``."""
        running = [d for d in self.devices if d.running]
        rss_kb = [d.rss_kb() for d in running]
        before = sum(d.cpu_ticks() for d in running)
        began = time.monotonic()
        time.sleep(window_s)
        ticks = sum(d.cpu_ticks() for d in running) - before
        elapsed = time.monotonic() - began
        return Footprint(
            devices=len(running),
            started_in_s=self.started_in_s,
            rss_total_mb=sum(rss_kb) / 1024,
            rss_max_mb=max(rss_kb) / 1024,
            idle_cpu_percent=100 * ticks / os.sysconf("SC_CLK_TCK") / elapsed,
        )

    def _publish_targets(self) -> None:
        if self.prometheus is not None:
            self.prometheus.set_targets(
                {d.device_id: d.metrics_target for d in self.devices if d.daemon is not None}
            )

    def stop(self) -> None:
        """Every device, then Prometheus, the artifact server and the brokers;
        asserts that every device exited 0 (all are stopped first)."""
        try:
            codes = self._each(Device.stop, [d for d in self.devices if d.daemon is not None])
        finally:
            if self.prometheus is not None:
                self.prometheus.stop()
            self.artifacts.stop()
            self.brokers.stop()
        failed = {d.device_id: code for d, code in codes.items() if code != 0}
        assert not failed, "devices exited uncleanly: " + ", ".join(
            f"{device_id} ({code}, {self.device(device_id).daemon.log_path})"
            for device_id, code in failed.items()
        )

    @staticmethod
    def _each(action: Callable[[Device], object], devices: list[Device]) -> dict[Device, object]:
        if not devices:
            return {}
        with ThreadPoolExecutor(max_workers=len(devices)) as pool:
            futures = {device: pool.submit(action, device) for device in devices}
        return {device: future.result() for device, future in futures.items()}

    def __enter__(self) -> Fleet:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.stop()
