"""Telemetry read straight from sysfs and procfs on a Jetson without the jtop
service (JetPack 5 and 6, Orin). Every path is taken under ``root``
(``telemetry.sysfs_root``, "/" on a device) so tests point it at fixture trees.

Where each figure comes from (paths relative to ``root``):

- iGPU: the devfreq node whose ``device/of_node/name`` is ``gpu`` (L4T 36:
  ``sys/class/devfreq/17000000.gpu`` -> ``devices/platform/bus@0/17000000.gpu``)
  or ``ga10b``/``gv11b``/``gp10b`` (L4T 35 and older); load is
  ``device/load`` in tenths of a percent, frequency ``cur_freq`` in Hz. The
  node is found by name, not by a fixed path, because L4T 35 and 36 differ.
- Temperatures: ``sys/class/thermal/thermal_zone*/type`` and ``temp``
  (milli-°C); a zone reading -256 °C or unreadable is offline (the Orin's CV
  zones while the DLA/PVA are off) and left out. ``cpu-thermal`` becomes ``cpu``.
- Power: INA3221 channels, ``sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/``
  ``inN_label``, ``inN_input`` (mV), ``currN_input`` (mA); ``NC`` channels
  skipped. The total is ``VDD_IN`` where the module has it (Orin NX/Nano),
  else the sum of the rails (AGX Orin), as jetson-stats reports it.
- Power mode: ``var/lib/nvpmodel/status`` (``pmode:0000``), named through
  ``etc/nvpmodel.conf``'s ``< POWER_MODEL ID=0 NAME=MAXN >`` lines.
- DLA: ``*.nvdla0``/``*.nvdla1`` platform devices (L4T 36:
  ``sys/devices/platform/bus@0/13e00000.host1x/15880000.nvdla0``; L4T 35:
  ``sys/devices/platform/13e40000.host1x/...``); on when their
  ``power/runtime_status`` is ``active``. Their clocks are in debugfs
  (root only): unknown here.
- Fan: the hwmon named ``pwmfan``, ``pwm1`` of 255.
- CPU: ``proc/stat`` between two reads, clocks from each core's
  ``cpufreq/scaling_cur_freq``; memory ``proc/meminfo``
  (used = MemTotal - MemAvailable).
- EMC load and clock and jetson_clocks need root (debugfs): None.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from edgebox.telemetry.sample import (
    DeviceInfo,
    EngineClock,
    GpuSample,
    PowerRail,
    TelemetrySample,
)
from edgebox.telemetry.source import SourceUnavailable

GPU_NODE_NAMES = ("gpu", "ga10b", "gv11b", "gp10b")
OFFLINE_ZONE_C = -256.0
TOTAL_RAILS = ("VDD_IN", "POM_5V_IN")
"""Rails that measure the whole module's input, where it has one."""
JETPACK_OF_L4T = {
    "36.4.4": "6.2.1",
    "36.4.3": "6.2",
    "36.4.0": "6.1",
    "36.3.0": "6.0",
    "36.2.0": "6.0 DP",
    "35.6.0": "5.1.4",
    "35.5.0": "5.1.3",
    "35.4.1": "5.1.2",
    "35.3.1": "5.1.1",
    "35.2.1": "5.1",
    "35.1.0": "5.0.2",
}
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)\.(\d+)")
_POWER_MODEL = re.compile(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=(\S+)\s*>")
_PMODE = re.compile(r"pmode:(\d+)")


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip().rstrip("\x00")
    except OSError:
        return None


def _number(path: Path) -> float | None:
    text = _text(path)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def find_gpu_devfreq(root: Path) -> Path | None:
    """The iGPU's devfreq directory under ``root``, or None."""
    for node in sorted((root / "sys/class/devfreq").glob("*")):
        if _text(node / "device/of_node/name") in GPU_NODE_NAMES:
            return node
    return None


def l4t_version(root: Path) -> str | None:
    """``# R36 (release), REVISION: 3.0`` in etc/nv_tegra_release -> "36.3.0"."""
    match = _RELEASE.search(_text(root / "etc/nv_tegra_release") or "")
    return ".".join(match.groups()) if match else None


def power_mode_id(root: Path) -> int | None:
    """nvpmodel's current mode (``pmode:0002`` in var/lib/nvpmodel/status), or None."""
    mode = _PMODE.search(_text(root / "var/lib/nvpmodel/status") or "")
    return int(mode.group(1)) if mode else None


def module_name(root: Path) -> str | None:
    """The module's name from the device tree (NUL-terminated there), or None."""
    return _text(root / "proc/device-tree/model")


def power_mode_names(root: Path) -> dict[int, str]:
    return {
        int(number): name
        for number, name in _POWER_MODEL.findall(_text(root / "etc/nvpmodel.conf") or "")
    }


class SysfsSource:
    """Reads under ``root``; the sampler thread alone calls ``read`` (it
    keeps the previous CPU counters). Raises SourceUnavailable when ``root``
    has neither ``proc/stat`` nor ``proc/meminfo``: nothing could be read."""

    name = "sysfs"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not (self.root / "proc/stat").is_file() and not (self.root / "proc/meminfo").is_file():
            raise SourceUnavailable(f"'{self.root}' has no proc/stat or proc/meminfo")
        self._gpu = find_gpu_devfreq(self.root)
        self._dla = self._find_dla()
        self._rails = self._find_rails()
        self._zones = sorted(
            (self.root / "sys/class/thermal").glob("thermal_zone*"),
            key=lambda p: int(p.name.removeprefix("thermal_zone") or 0),
        )
        self._fan = next(
            (
                hwmon / "pwm1"
                for hwmon in sorted((self.root / "sys/class/hwmon").glob("hwmon*"))
                if _text(hwmon / "name") == "pwmfan"
            ),
            None,
        )
        self._mode_names = power_mode_names(self.root)
        self._device = self._read_device()
        self._previous_cpu = self._cpu_counters()

    def device_info(self) -> DeviceInfo:
        return self._device

    def close(self) -> None:
        pass

    def _read_device(self) -> DeviceInfo:
        l4t = l4t_version(self.root)
        memory = self._meminfo()
        return DeviceInfo(
            model=module_name(self.root) or "unknown Jetson",
            l4t=l4t,
            jetpack=JETPACK_OF_L4T.get(l4t or ""),
            cpu_cores=self._present_cores(),
            memory_total_bytes=memory.get("MemTotal", 0),
            has_gpu=self._gpu is not None,
            dla_cores=len(self._dla),
        )

    def _present_cores(self) -> int:
        text = _text(self.root / "sys/devices/system/cpu/present") or ""
        count = 0
        for part in filter(None, text.split(",")):
            low, _, high = part.partition("-")
            count += int(high or low) - int(low) + 1
        if count:
            return count
        return len(self._cpu_counters()) - 1 if (self.root / "proc/stat").is_file() else 0

    def _find_dla(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        platform = self.root / "sys/devices/platform"
        for pattern in ("*.nvdla[0-9]", "*/*.nvdla[0-9]", "*/*/*.nvdla[0-9]"):
            for node in sorted(platform.glob(pattern)):
                found.setdefault(f"DLA{node.name[-1]}", node)
        return dict(sorted(found.items()))

    def _find_rails(self) -> list[tuple[str, Path, str]]:
        """(rail name, hwmon dir, channel number) for every labelled channel."""
        rails = []
        for label in sorted(self.root.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label")):
            channel = label.name.removeprefix("in").removesuffix("_label")
            name = _text(label)
            if not name or name == "NC" or not (label.parent / f"curr{channel}_input").exists():
                continue
            rails.append((name, label.parent, channel))
        return rails

    def read(self) -> TelemetrySample:
        cpu_pct, per_core = self._cpu()
        memory = self._meminfo()
        total = memory.get("MemTotal")
        available = memory.get("MemAvailable")
        used = total - available if total is not None and available is not None else None
        power = self._power()
        mode_id = power_mode_id(self.root)
        fan = _number(self._fan) if self._fan is not None else None
        return TelemetrySample(
            timestamp=time.time(),
            source=self.name,
            cpu_pct=cpu_pct,
            cpu_per_core_pct=per_core,
            memory_used_bytes=used,
            memory_total_bytes=total,
            gpu=self._gpu_sample(),
            temperatures_c=self._temperatures(),
            power=power,
            total_power_mw=self._total_power(power),
            fan_pct=round(fan * 100 / 255, 1) if fan is not None else None,
            nvpmodel=self._mode_names.get(mode_id) if mode_id is not None else None,
            nvpmodel_id=mode_id,
            engines=self._engines(),
            cpu_freq_mhz=self._cpu_freq_mhz(),
        )

    def _gpu_sample(self) -> GpuSample | None:
        if self._gpu is None:
            return None
        load = _number(self._gpu / "device/load")
        freq = _number(self._gpu / "cur_freq")
        return GpuSample(
            load_pct=load / 10 if load is not None else None,
            freq_mhz=freq / 1e6 if freq is not None else None,
        )

    def _temperatures(self) -> dict[str, float]:
        temperatures: dict[str, float] = {}
        for zone in self._zones:
            kind = _text(zone / "type")
            milli_c = _number(zone / "temp")
            if not kind or milli_c is None or milli_c / 1000 <= OFFLINE_ZONE_C:
                continue
            name = kind.removesuffix("-thermal")
            if name in temperatures:
                name = f"{name}_{zone.name.removeprefix('thermal_zone')}"
            temperatures[name] = milli_c / 1000
        return temperatures

    def _power(self) -> dict[str, PowerRail]:
        power: dict[str, PowerRail] = {}
        for name, hwmon, channel in self._rails:
            voltage = _number(hwmon / f"in{channel}_input")
            current = _number(hwmon / f"curr{channel}_input")
            milliwatts = None
            if voltage is not None and current is not None:
                milliwatts = voltage * current / 1000
            power[name] = PowerRail(voltage_mv=voltage, current_ma=current, power_mw=milliwatts)
        return power

    @staticmethod
    def _total_power(power: dict[str, PowerRail]) -> float | None:
        for name in TOTAL_RAILS:
            if name in power:
                return power[name].power_mw
        readings = [rail.power_mw for rail in power.values()]
        if not readings or any(reading is None for reading in readings):
            return None
        return sum(reading for reading in readings if reading is not None)

    def _cpu_freq_mhz(self) -> tuple[float | None, ...]:
        """cpufreq's ``scaling_cur_freq`` (kHz, readable by anyone) per core;
        None for an offline core (its cpufreq folder is gone)."""
        cpus = self.root / "sys/devices/system/cpu"
        clocks = []
        for core in range(self._device.cpu_cores):
            khz = _number(cpus / f"cpu{core}/cpufreq/scaling_cur_freq")
            clocks.append(khz / 1000 if khz is not None else None)
        return tuple(clocks)

    def _engines(self) -> dict[str, EngineClock]:
        engines = {}
        for name, node in self._dla.items():
            status = _text(node / "power/runtime_status")
            if status is not None:
                engines[name] = EngineClock(online=status == "active")
        return engines

    def _meminfo(self) -> dict[str, int]:
        values = {}
        for line in (_text(self.root / "proc/meminfo") or "").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
        return values

    def _cpu_counters(self) -> dict[str, tuple[int, int]]:
        """``cpu``/``cpuN`` -> (busy, total) jiffies since boot."""
        counters = {}
        for line in (_text(self.root / "proc/stat") or "").splitlines():
            name, *fields = line.split()
            if not name.startswith("cpu") or len(fields) < 4:
                continue
            # user nice system idle iowait irq softirq steal; guest is already in user.
            ticks = [int(field) for field in fields[:8]]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
            counters[name] = (sum(ticks) - idle, sum(ticks))
        return counters

    def _cpu(self) -> tuple[float | None, tuple[float | None, ...]]:
        """Busy percent since the previous read (or the construction): None
        when no tick passed, and for a core offline at either read."""
        now = self._cpu_counters()
        previous, self._previous_cpu = self._previous_cpu, now

        def busy(name: str) -> float | None:
            if name not in now or name not in previous:
                return None
            elapsed = now[name][1] - previous[name][1]
            if elapsed <= 0:
                return None
            return round(100 * (now[name][0] - previous[name][0]) / elapsed, 1)

        return busy("cpu"), tuple(busy(f"cpu{i}") for i in range(self._device.cpu_cores))
