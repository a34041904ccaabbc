"""Which telemetry source the daemon reads.

``telemetry.source`` is ``auto``, ``jtop``, ``sysfs`` or ``psutil``. ``auto``
tries, in order: jetson-stats (only when it is installed and its service's
socket ``/run/jtop.sock`` exists), sysfs (only when ``telemetry.sysfs_root``
looks like a Jetson: ``etc/nv_tegra_release`` or an iGPU devfreq node), then
psutil, which works anywhere. A named source that cannot start is logged as a
warning and the rest of that order is tried: missing telemetry hardware never
stops the daemon from serving.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgebox.telemetry import jtop_source, psutil_source, sysfs_source
from edgebox.telemetry.source import SOURCES, SourceUnavailable, TelemetrySource

log = logging.getLogger("edgebox.telemetry")

JTOP_SOCKET = Path("/run/jtop.sock")
"""Where jetson-stats' root service (``jtop.service``) listens."""


def jtop_installed() -> bool:
    """jetson-stats is importable (without importing it: it is AGPL-3.0 and
    is only ever imported when a jtop source is opened)."""
    return importlib.util.find_spec("jtop") is not None


def looks_like_jetson(root: Path) -> bool:
    return (root / "etc/nv_tegra_release").is_file() or sysfs_source.find_gpu_devfreq(
        root
    ) is not None


def open_source(
    setting: str,
    sysfs_root: Path,
    *,
    jtop_socket: Path = JTOP_SOCKET,
    connect_jtop: Callable[[], Any] | None = None,
) -> TelemetrySource:
    """The source ``setting`` names (see the module docstring for ``auto``
    and for a named source that fails). ``connect_jtop`` replaces
    ``jtop.jtop`` (tests give a fake); with it, jetson-stats need not be
    installed. Raises SourceUnavailable only when not even psutil works.
    The source classes are looked up on their modules when tried, so a test
    can replace one."""
    if setting not in SOURCES:
        raise ValueError(f"telemetry source: expected one of {', '.join(SOURCES)}, got {setting!r}")

    def jtop_problem() -> str | None:
        if connect_jtop is None and not jtop_installed():
            return "jetson-stats (jtop) is not installed"
        if not jtop_socket.exists():
            return f"'{jtop_socket}' does not exist (jtop.service is not running)"
        return None

    def sysfs_problem() -> str | None:
        if not looks_like_jetson(sysfs_root):
            return (
                f"'{sysfs_root}' does not look like a Jetson (no etc/nv_tegra_release, "
                "no iGPU devfreq node)"
            )
        return None

    order: list[tuple[str, Callable[[], TelemetrySource], Callable[[], str | None]]] = [
        ("jtop", lambda: jtop_source.JtopSource(connect_jtop), jtop_problem),
        ("sysfs", lambda: sysfs_source.SysfsSource(sysfs_root), sysfs_problem),
        ("psutil", lambda: psutil_source.PsutilSource(), lambda: None),
    ]
    if setting != "auto":
        order = order[[name for name, _, _ in order].index(setting) :]
    skipped: list[str] = []
    for name, build, problem in order:
        # A named source is tried even where auto's cheap check would skip it.
        reason = None if name == setting else problem()
        if reason is None:
            try:
                source = build()
            except SourceUnavailable as exc:
                reason = str(exc)
        if reason is not None:
            skipped.append(f"{name}: {reason}")
            if name == setting:
                log.warning(
                    "telemetry: source '%s' unavailable (%s); trying the next", name, reason
                )
            continue
        log.info(
            "telemetry: reading from %s%s",
            name,
            f" (skipped {'; '.join(skipped)})" if skipped else "",
        )
        return source
    raise SourceUnavailable(f"telemetry: no source works ({'; '.join(skipped)})")
