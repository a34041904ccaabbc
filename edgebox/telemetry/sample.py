"""One telemetry reading, whatever source took it (jtop, sysfs or psutil).

A field a source cannot know is None (or empty), never 0: a machine without a
GPU has ``gpu`` None, and the dashboard says "no GPU" instead of drawing a flat
line at zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    load_pct: float | None
    """0-100; an Orin's iGPU load from devfreq (``load`` / 10)."""
    freq_mhz: float | None = None
    memory_used_bytes: int | None = None
    """On a Jetson the GPU shares RAM: None (see ``memory``)."""


@dataclass(frozen=True)
class PowerRail:
    voltage_mv: float | None
    current_ma: float | None
    power_mw: float | None


@dataclass(frozen=True)
class EngineClock:
    """A fixed-function engine (DLA, PVA, NVENC...): jtop reports its clock and
    whether it is on, not a utilisation."""

    online: bool
    freq_mhz: float | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """What does not change while the daemon runs."""

    model: str
    """E.g. "NVIDIA Jetson AGX Orin Developer Kit", or the host's CPU model."""
    l4t: str | None = None
    jetpack: str | None = None
    cpu_cores: int = 0
    memory_total_bytes: int = 0
    has_gpu: bool = False
    dla_cores: int = 0


@dataclass(frozen=True)
class TelemetrySample:
    timestamp: float
    """Wall-clock seconds since the epoch."""
    source: str
    """jtop, sysfs or psutil."""
    cpu_pct: float | None
    cpu_per_core_pct: tuple[float | None, ...] = ()
    """One entry per core, in core order; None for a core that is offline
    (an nvpmodel mode may switch cores off)."""
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    gpu: GpuSample | None = None
    emc_pct: float | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    """Zone name (e.g. "cpu", "gpu", "tj") -> °C; offline zones left out."""
    power: dict[str, PowerRail] = field(default_factory=dict)
    """Rail name (e.g. "VDD_GPU_SOC", "VDD_IN") -> reading."""
    total_power_mw: float | None = None
    fan_pct: float | None = None
    nvpmodel: str | None = None
    """The power mode's name, e.g. "MAXN" or "15W"."""
    nvpmodel_id: int | None = None
    """The power mode's number (``nvpmodel -q``), known even when its name is not."""
    jetson_clocks: bool | None = None
    engines: dict[str, EngineClock] = field(default_factory=dict)
    """E.g. "DLA0", "DLA1", "PVA0"."""
    cpu_freq_mhz: tuple[float | None, ...] = ()
    """Each core's current clock, in core order; None for an offline core
    or one whose clock the source cannot read (empty: none can be)."""
    emc_freq_mhz: float | None = None
    """The external memory controller's clock (jtop only: debugfs)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
