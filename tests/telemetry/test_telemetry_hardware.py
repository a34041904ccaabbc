"""On a real Jetson: the sysfs reader (and jtop, when its service runs) read
this module's own GPU, temperatures and power rails. Skipped elsewhere, with
the reason; the fixture trees and the jtop fake cover the logic everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.telemetry.choice import jtop_installed, looks_like_jetson
from edgebox.telemetry.jtop_source import JtopSource
from edgebox.telemetry.sysfs_source import SysfsSource

ROOT = Path("/")
JTOP_SOCKET = Path("/run/jtop.sock")

on_jetson = pytest.mark.skipif(
    not looks_like_jetson(ROOT), reason="not a Jetson (no /etc/nv_tegra_release, no iGPU devfreq)"
)


@on_jetson
def test_sysfs_reads_this_modules_gpu_temperatures_and_rails():
    source = SysfsSource(ROOT)
    first, second = source.read(), source.read()
    device = source.device_info()
    assert "Orin" in device.model and device.has_gpu
    assert second.gpu is not None and second.gpu.load_pct is not None
    assert 0 <= second.gpu.load_pct <= 100
    assert second.temperatures_c, "no thermal zone read"
    assert all(-40 < c < 125 for c in second.temperatures_c.values())
    assert second.power, "no INA3221 rail read"
    assert second.cpu_pct is None or 0 <= second.cpu_pct <= 100
    assert first.timestamp <= second.timestamp


@on_jetson
@pytest.mark.skipif(
    not (jtop_installed() and JTOP_SOCKET.exists()),
    reason="jetson-stats is not installed or its service (/run/jtop.sock) is not running",
)
def test_jtop_reads_the_same_module():
    source = JtopSource()
    try:
        sample = source.read()
    finally:
        source.close()
    assert sample.source == "jtop"
    assert sample.gpu is not None and sample.temperatures_c and sample.power
