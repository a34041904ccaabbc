"""The clocks a technician compares with the power mode: each CPU core's and
the iGPU's current and highest frequency, and whether ``jetson_clocks`` has
pinned them (lowest allowed = highest allowed), read from sysfs under
``root`` as the telemetry source reads it. A benchmark taken with clocks
left to scale down measures the governor, not the model."""

from __future__ import annotations

from pathlib import Path

from edgebox.selftest.report import Check, Status
from edgebox.telemetry import sysfs_source

SECTION = "platform"


def _number(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def cpu_clocks(root: Path) -> list[dict[str, float | None]]:
    """Per online core, in MHz: ``cur``, ``max`` (policy), ``min`` (policy)."""
    cores = []
    for folder in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq")):
        kilohertz = {key: _number(folder / f"scaling_{key}_freq") for key in ("cur", "max", "min")}
        cores.append({key: v / 1e3 if v is not None else None for key, v in kilohertz.items()})
    return cores


def gpu_clocks(root: Path) -> dict[str, float | None]:
    """The iGPU's devfreq ``cur_freq``, ``max_freq`` and ``min_freq``, in MHz."""
    folder = sysfs_source.find_gpu_devfreq(root)
    if folder is None:
        return {}
    hertz = {key: _number(folder / f"{key}_freq") for key in ("cur", "max", "min")}
    return {key: v / 1e6 if v is not None else None for key, v in hertz.items()}


def clocks_check(root: Path, jetson: bool) -> Check:
    if not jetson:
        return Check(SECTION, "clocks", Status.ABSENT, "not a Jetson")
    cpus = [core for core in cpu_clocks(root) if core["cur"] is not None]
    gpu = gpu_clocks(root)
    if not cpus and gpu.get("cur") is None:
        return Check(SECTION, "clocks", Status.WARN, "no cpufreq or GPU devfreq readable")
    parts = []
    if cpus:
        now = [core["cur"] for core in cpus]
        highest = max((core["max"] for core in cpus if core["max"] is not None), default=None)
        parts.append(
            f"CPU {len(cpus)} cores online at {min(now):.0f}-{max(now):.0f} MHz"
            + (f" of {highest:.0f}" if highest is not None else "")
        )
    if gpu.get("cur") is not None:
        parts.append(
            f"GPU at {gpu['cur']:.0f} MHz"
            + (f" of {gpu['max']:.0f}" if gpu.get("max") is not None else "")
        )
    pinned = _pinned(cpus, gpu)
    if pinned is not None:
        parts.append("jetson_clocks on" if pinned else "scaling (jetson_clocks off)")
    facts = {"cpu_mhz": cpus, "gpu_mhz": gpu, "pinned": pinned}
    return Check(SECTION, "clocks", Status.PASS, "; ".join(parts), facts)


def _pinned(cpus: list[dict], gpu: dict) -> bool | None:
    """True when every clock's lowest allowed frequency is its highest (what
    ``jetson_clocks`` sets); None when the limits are not readable."""
    limits = [(core["min"], core["max"]) for core in cpus] + [(gpu.get("min"), gpu.get("max"))]
    known = [(low, high) for low, high in limits if low is not None and high is not None]
    if not known:
        return None
    return all(low >= high for low, high in known)
