"""Telemetry anywhere psutil runs (a developer's PC, a CI runner, a non-Jetson
box): CPU, memory and whatever thermal sensors the kernel exposes. It knows
nothing about a GPU, so ``gpu`` is None and the dashboard says "no GPU"."""

from __future__ import annotations

import importlib
import platform
import time
from pathlib import Path
from types import ModuleType

from edgebox.telemetry.sample import DeviceInfo, TelemetrySample
from edgebox.telemetry.source import SourceUnavailable


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.machine() or "unknown"


class PsutilSource:
    """``psutil_module`` replaces the real psutil (tests give a fake). The
    sampler thread alone calls ``read``: psutil's CPU percentages are since
    its previous call, primed here so the first read has one."""

    name = "psutil"

    def __init__(self, psutil_module: ModuleType | object | None = None) -> None:
        if psutil_module is None:
            try:
                psutil_module = importlib.import_module("psutil")
            except ImportError:
                raise SourceUnavailable("psutil is not installed") from None
        self._psutil = psutil_module
        self._psutil.cpu_percent(interval=None)
        self._psutil.cpu_percent(interval=None, percpu=True)
        self._device = DeviceInfo(
            model=_cpu_model(),
            cpu_cores=self._psutil.cpu_count(logical=True) or 0,
            memory_total_bytes=self._psutil.virtual_memory().total,
        )

    def device_info(self) -> DeviceInfo:
        return self._device

    def close(self) -> None:
        pass

    def read(self) -> TelemetrySample:
        memory = self._psutil.virtual_memory()
        return TelemetrySample(
            timestamp=time.time(),
            source=self.name,
            cpu_pct=float(self._psutil.cpu_percent(interval=None)),
            cpu_per_core_pct=tuple(
                float(pct) for pct in self._psutil.cpu_percent(interval=None, percpu=True)
            ),
            memory_used_bytes=memory.total - memory.available,
            memory_total_bytes=memory.total,
            temperatures_c=self._temperatures(),
        )

    def _temperatures(self) -> dict[str, float]:
        """``coretemp`` with labels ``Package id 0`` and ``Core 0`` ->
        ``coretemp/Package id 0``...; a sensor with one unlabelled reading
        keeps its own name."""
        read = getattr(self._psutil, "sensors_temperatures", None)
        if read is None:
            return {}
        try:
            sensors = read()
        except (OSError, RuntimeError):
            return {}
        temperatures: dict[str, float] = {}
        for sensor, readings in sorted(sensors.items()):
            for index, reading in enumerate(readings):
                if reading.current is None:
                    continue
                if len(readings) == 1 and not reading.label:
                    name = sensor
                else:
                    name = f"{sensor}/{reading.label or index}"
                temperatures.setdefault(name, float(reading.current))
        return temperatures
