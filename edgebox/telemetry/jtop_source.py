"""Telemetry from jetson-stats' ``jtop`` client (4.x), which talks to the
root ``jtop.service`` over ``/run/jtop.sock`` and so sees what an unprivileged
daemon cannot (EMC load, jetson_clocks, engine clocks from debugfs).

jetson-stats is AGPL-3.0: edgebox never depends on it and imports it only
here, only when this source is opened on a machine where it is installed.

The mapping follows jtop 4.x's documented properties (``jtop/jtop.py``):
``cpu`` (``total`` and per-core ``cpu`` list, percentages, ``freq.cur`` in
kHz), ``memory`` (``RAM``/``EMC``; sizes in kB, EMC ``val`` in percent of
bandwidth and ``cur`` in kHz), ``gpu``
(per GPU ``status.load`` in percent, ``freq.cur`` in kHz), ``engine`` (group
-> engine -> ``online``/``cur`` kHz), ``fan`` (per fan ``speed`` list, 0-100),
``temperature`` (per zone ``online``/``temp`` °C, -256 when offline),
``power`` (``rail`` -> ``volt`` mV/``curr`` mA/``power`` mW, and ``tot``),
``nvpmodel`` (``.name``/``.id``), ``jetson_clocks`` (truthy when on) and
``board['hardware']`` (``Model``, ``L4T``, ``Jetpack``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from edgebox.telemetry.sample import (
    DeviceInfo,
    EngineClock,
    GpuSample,
    PowerRail,
    TelemetrySample,
)
from edgebox.telemetry.source import SourceUnavailable

OFFLINE_C = -256.0
_MAIN_CLOCK_SUFFIXES = ("_CORE", "_VPS")
"""A DLA's compute clock is ``DLA0_CORE`` (beside ``DLA0_FALCON``), a PVA's
``PVA0_VPS`` (beside ``PVA0_CPU_AXI``)."""


def connect_jtop(interval_s: float = 1.0) -> Any:
    """A started ``jtop.jtop`` client (raises its ``JtopException`` when the
    service is down, the user is not in group ``jtop``, or versions differ)."""
    module = importlib.import_module("jtop")
    client = module.jtop(interval=interval_s)
    client.start()
    return client


def _mhz(khz: Any) -> float | None:
    return khz / 1000 if isinstance(khz, (int, float)) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class JtopSource:
    """Owns one jtop client; the sampler thread alone calls ``read``, which
    takes jtop's latest values without waiting for new ones."""

    name = "jtop"

    def __init__(self, connect: Callable[[], Any] | None = None) -> None:
        try:
            self._jetson = (connect or connect_jtop)()
        except ImportError:
            raise SourceUnavailable("jetson-stats (jtop) is not installed") from None
        except Exception as exc:  # JtopException, or the socket's OSError
            raise SourceUnavailable(f"cannot connect to jtop.service: {exc}") from None
        self._device = self._read_device()

    def device_info(self) -> DeviceInfo:
        return self._device

    def close(self) -> None:
        self._jetson.close()

    def _read_device(self) -> DeviceInfo:
        jetson = self._jetson
        hardware = (jetson.board or {}).get("hardware", {})
        ram = jetson.memory.get("RAM", {})
        return DeviceInfo(
            model=hardware.get("Model") or hardware.get("Module") or "unknown Jetson",
            l4t=hardware.get("L4T") or None,
            jetpack=hardware.get("Jetpack") or None,
            cpu_cores=len(jetson.cpu.get("cpu", [])),
            memory_total_bytes=int(ram.get("tot", 0)) * 1024,
            has_gpu=bool(jetson.gpu),
            dla_cores=sum(1 for group in jetson.engine if group.startswith("DLA")),
        )

    def read(self) -> TelemetrySample:
        jetson = self._jetson
        # spin: do not wait for fresh data; raises what jtop's thread caught.
        if not jetson.ok(spin=True):
            raise RuntimeError("jtop: the client stopped (jtop.service went away)")
        cpu = jetson.cpu
        memory = jetson.memory
        ram = memory.get("RAM", {})
        emc = memory.get("EMC", {})
        power = jetson.power or {}
        rails = {
            name: PowerRail(
                voltage_mv=_number(rail.get("volt")),
                current_ma=_number(rail.get("curr")),
                power_mw=_number(rail.get("power")),
            )
            for name, rail in power.get("rail", {}).items()
            if rail.get("online", True)
        }
        fans = list(jetson.fan.values()) if jetson.fan else []
        speeds = fans[0].get("speed", []) if fans else []
        nvpmodel = jetson.nvpmodel
        clocks = jetson.jetson_clocks
        total_idle = _number(cpu.get("total", {}).get("idle"))
        return TelemetrySample(
            timestamp=time.time(),
            source=self.name,
            cpu_pct=round(100 - total_idle, 1) if total_idle is not None else None,
            cpu_per_core_pct=tuple(
                round(100 - core["idle"], 1) if core.get("online") and "idle" in core else None
                for core in cpu.get("cpu", [])
            ),
            memory_used_bytes=int(ram["used"]) * 1024 if "used" in ram else None,
            memory_total_bytes=int(ram["tot"]) * 1024 if "tot" in ram else None,
            gpu=self._gpu(jetson.gpu),
            emc_pct=_number(emc.get("val")) if emc.get("online", True) else None,
            temperatures_c={
                name: float(zone["temp"])
                for name, zone in jetson.temperature.items()
                if zone.get("online", True) and _number(zone.get("temp")) not in (None, OFFLINE_C)
            },
            power=rails,
            total_power_mw=_number(power.get("tot", {}).get("power")),
            fan_pct=_number(speeds[0]) if speeds else None,
            nvpmodel=nvpmodel.name if nvpmodel is not None else None,
            nvpmodel_id=nvpmodel.id if nvpmodel is not None else None,
            jetson_clocks=bool(clocks) if clocks is not None else None,
            engines=self._engines(jetson.engine),
            cpu_freq_mhz=tuple(
                _mhz(core.get("freq", {}).get("cur")) if core.get("online") else None
                for core in cpu.get("cpu", [])
            ),
            emc_freq_mhz=_mhz(emc.get("cur")) if emc.get("online", True) else None,
        )

    @staticmethod
    def _gpu(gpus: Mapping[str, Any]) -> GpuSample | None:
        if not gpus:
            return None
        gpu = next(iter(gpus.values()))
        return GpuSample(
            load_pct=_number(gpu.get("status", {}).get("load")),
            freq_mhz=_mhz(gpu.get("freq", {}).get("cur")),
        )

    @staticmethod
    def _engines(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, EngineClock]:
        """One entry per engine: ``NVJPG`` and ``NVJPG1`` stay apart, while a
        group's sub-clocks (``DLA0_CORE``, ``DLA0_FALCON``) become one ``DLA0``
        with its compute clock, on when any of them is."""
        engines: dict[str, EngineClock] = {}

        def clock(engine: Mapping[str, Any], online: bool) -> EngineClock:
            return EngineClock(online=online, freq_mhz=_mhz(engine.get("cur")) if online else None)

        for group, members in groups.items():
            parts = {n: e for n, e in members.items() if n.startswith(group + "_")}
            for name, engine in members.items():
                if name not in parts:
                    engines[name] = clock(engine, bool(engine.get("online")))
            if parts and group not in engines:
                main = next(
                    (parts[group + s] for s in _MAIN_CLOCK_SUFFIXES if group + s in parts),
                    next(iter(parts.values())),
                )
                engines[group] = EngineClock(
                    online=any(bool(part.get("online")) for part in parts.values()),
                    freq_mhz=_mhz(main.get("cur")) if main.get("online") else None,
                )
        return engines
