"""The sysfs source against trees shaped like an AGX Orin (JetPack 6.0, two
DLA cores) and an Orin Nano (JetPack 6.1, no DLA, two cores off in 7W)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edgebox.telemetry.sample import DeviceInfo, EngineClock, GpuSample, PowerRail
from edgebox.telemetry.source import SourceUnavailable
from edgebox.telemetry.sysfs_source import SysfsSource, find_gpu_devfreq, l4t_version

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def agx_orin(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "agx_orin", tmp_path / "agx_orin"))


@pytest.fixture
def orin_nano(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "orin_nano", tmp_path / "orin_nano"))


def advance_cpu(root: Path, busy: list[int], idle: list[int]) -> None:
    """Adds ``busy`` user and ``idle`` idle jiffies per listed core to proc/stat."""
    lines = (root / "proc/stat").read_text().splitlines()
    out = []
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            index = int(name[3:])
            numbers = [int(f) for f in fields]
            numbers[0] += busy[index]
            numbers[3] += idle[index]
            line = " ".join([name, *map(str, numbers)])
        out.append(line)
    cores = [row.split() for row in out if row.startswith("cpu") and not row.startswith("cpu ")]
    total = [sum(int(c[i]) for c in cores) for i in range(1, len(cores[0]))]
    out[0] = "cpu  " + " ".join(map(str, total))
    (root / "proc/stat").write_text("\n".join(out) + "\n")


def test_agx_orin_device_info():
    assert SysfsSource(FIXTURES / "agx_orin").device_info() == DeviceInfo(
        model="NVIDIA Jetson AGX Orin Developer Kit",
        l4t="36.3.0",
        jetpack="6.0",
        cpu_cores=12,
        memory_total_bytes=64335836 * 1024,
        has_gpu=True,
        dla_cores=2,
    )


def test_orin_nano_has_no_dla_and_six_cores():
    info = SysfsSource(FIXTURES / "orin_nano").device_info()
    assert (info.model, info.l4t, info.jetpack, info.cpu_cores, info.dla_cores, info.has_gpu) == (
        "NVIDIA Jetson Orin Nano Developer Kit",
        "36.4.0",
        "6.1",
        6,
        0,
        True,
    )


def test_agx_orin_sample_gpu_temperatures_power_mode_fan_and_dla():
    sample = SysfsSource(FIXTURES / "agx_orin").read()
    assert sample.source == "sysfs"
    assert sample.gpu == GpuSample(load_pct=52.3, freq_mhz=1300.5)
    # The CV zones read -256 °C while the DLA/PVA are off: offline, left out.
    assert sample.temperatures_c == {
        "cpu": 47.312,
        "gpu": 45.718,
        "soc0": 44.906,
        "soc1": 45.25,
        "soc2": 44.218,
        "tj": 47.312,
    }
    assert sample.power == {
        "VDD_GPU_SOC": PowerRail(4992.0, 636.0, 4992 * 636 / 1000),
        "VDD_CPU_CV": PowerRail(4992.0, 159.0, 4992 * 159 / 1000),
        "VIN_SYS_5V0": PowerRail(4984.0, 437.0, 4984 * 437 / 1000),
        "VDDQ_VDD2_1V8AO": PowerRail(4992.0, 120.0, 4992 * 120 / 1000),
    }
    assert sample.total_power_mw == pytest.approx(sum(r.power_mw for r in sample.power.values()))
    assert (sample.nvpmodel, sample.nvpmodel_id) == ("MAXN", 0)
    assert sample.fan_pct == 25.9
    assert sample.engines == {"DLA0": EngineClock(online=False), "DLA1": EngineClock(online=True)}
    assert (sample.emc_pct, sample.jetson_clocks) == (None, None)
    assert sample.memory_total_bytes == 64335836 * 1024
    assert sample.memory_used_bytes == (64335836 - 60112340) * 1024


def test_orin_nano_total_power_is_vdd_in_and_its_mode_is_named_from_nvpmodel_conf():
    sample = SysfsSource(FIXTURES / "orin_nano").read()
    assert sample.total_power_mw == 5064 * 912 / 1000
    assert (sample.nvpmodel, sample.nvpmodel_id) == ("7W", 1)
    assert sample.engines == {}
    assert sample.fan_pct is None
    assert sample.gpu == GpuSample(load_pct=0.0, freq_mhz=306.0)


def test_cpu_load_is_measured_between_two_reads_and_offline_cores_are_none(orin_nano):
    source = SysfsSource(orin_nano)
    unchanged = source.read()
    assert unchanged.cpu_pct is None
    advance_cpu(orin_nano, busy=[25, 50, 0, 100], idle=[75, 50, 100, 0])
    sample = source.read()
    assert sample.cpu_per_core_pct == (25.0, 50.0, 0.0, 100.0, None, None)
    assert sample.cpu_pct == 43.8


def test_missing_nodes_leave_their_fields_none_without_raising(agx_orin):
    (agx_orin / "sys/class/devfreq/17000000.gpu/device/load").unlink()
    (agx_orin / "var/lib/nvpmodel/status").unlink()
    (agx_orin / "etc/nvpmodel.conf").unlink()
    shutil.rmtree(agx_orin / "sys/bus/i2c")
    source = SysfsSource(agx_orin)
    (agx_orin / "sys/class/thermal/thermal_zone0/temp").unlink()
    sample = source.read()
    assert sample.gpu == GpuSample(load_pct=None, freq_mhz=1300.5)
    assert (sample.nvpmodel, sample.nvpmodel_id) == (None, None)
    assert (sample.power, sample.total_power_mw) == ({}, None)
    assert "cpu" not in sample.temperatures_c


def test_a_power_mode_without_a_name_keeps_its_number(agx_orin):
    (agx_orin / "etc/nvpmodel.conf").unlink()
    (agx_orin / "var/lib/nvpmodel/status").write_text("pmode:0002\n")
    sample = SysfsSource(agx_orin).read()
    assert (sample.nvpmodel, sample.nvpmodel_id) == (None, 2)


def test_the_gpu_is_found_by_its_of_node_name_not_a_fixed_path(agx_orin):
    old = agx_orin / "sys/class/devfreq/17000000.gpu"
    old.rename(agx_orin / "sys/class/devfreq/17000000.ga10b")
    (agx_orin / "sys/class/devfreq/17000000.ga10b/device/of_node/name").write_text("ga10b\x00")
    assert find_gpu_devfreq(agx_orin) == agx_orin / "sys/class/devfreq/17000000.ga10b"
    assert SysfsSource(agx_orin).read().gpu.load_pct == 52.3


def test_a_root_without_proc_is_unavailable(tmp_path):
    with pytest.raises(SourceUnavailable, match=f"'{tmp_path}' has no proc/stat or proc/meminfo"):
        SysfsSource(tmp_path)


def test_l4t_version_reads_release_and_revision(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text(
        "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64\n"
    )
    assert l4t_version(tmp_path) == "35.4.1"
    assert l4t_version(tmp_path / "nowhere") is None


def test_core_clocks_come_from_cpufreq_and_a_core_without_one_is_none():
    sample = SysfsSource(FIXTURES / "agx_orin").read()
    # The fixture gives cores 0-10 1100, 1200 ... 2100 MHz; core 11 has no cpufreq.
    assert sample.cpu_freq_mhz == (*(1100.0 + 100 * core for core in range(11)), None)
    assert sample.emc_freq_mhz is None
    assert SysfsSource(FIXTURES / "orin_nano").read().cpu_freq_mhz == (None,) * 6
