"""The jtop source maps jetson-stats 4.x's properties (kB, kHz, -256 °C for
offline) onto the sample, against FakeJtop shaped like an AGX Orin."""

from __future__ import annotations

import pytest

from edgebox.telemetry.jtop_source import JtopSource
from edgebox.telemetry.sample import DeviceInfo, EngineClock, GpuSample, PowerRail
from edgebox.telemetry.source import SourceUnavailable
from fakes.fake_jtop import FakeJetsonClocks, FakeJtop, FakeNVPModel


def source_with(jetson: FakeJtop) -> JtopSource:
    return JtopSource(lambda: jetson)


def test_device_info_from_the_board_cpu_memory_and_engines():
    assert source_with(FakeJtop()).device_info() == DeviceInfo(
        model="NVIDIA Jetson AGX Orin Developer Kit",
        l4t="36.3.0",
        jetpack="6.0",
        cpu_cores=12,
        memory_total_bytes=64335836 * 1024,
        has_gpu=True,
        dla_cores=2,
    )


def test_cpu_memory_gpu_and_emc():
    sample = source_with(FakeJtop()).read()
    assert sample.source == "jtop"
    assert sample.cpu_pct == 12.5
    assert sample.cpu_per_core_pct[:3] == (20.0, 14.5, 10.0)
    assert len(sample.cpu_per_core_pct) == 12
    assert (sample.memory_used_bytes, sample.memory_total_bytes) == (
        4223496 * 1024,
        64335836 * 1024,
    )
    assert sample.gpu == GpuSample(load_pct=52.3, freq_mhz=1300.5)
    assert sample.emc_pct == 14.0


def test_temperatures_leave_offline_zones_out():
    sample = source_with(FakeJtop()).read()
    assert sample.temperatures_c == {
        "cpu": 47.3,
        "gpu": 45.7,
        "soc0": 44.9,
        "soc1": 45.2,
        "soc2": 44.2,
        "tj": 47.3,
    }


def test_power_rails_total_fan_mode_and_clocks():
    sample = source_with(FakeJtop()).read()
    assert sample.power["VDD_GPU_SOC"] == PowerRail(4992.0, 636.0, 3174.0)
    assert sorted(sample.power) == ["VDDQ_VDD2_1V8AO", "VDD_CPU_CV", "VDD_GPU_SOC", "VIN_SYS_5V0"]
    assert sample.total_power_mw == 6743.0
    assert sample.fan_pct == 25.9
    assert (sample.nvpmodel, sample.nvpmodel_id, sample.jetson_clocks) == ("MAXN", 0, False)


def test_engines_one_per_dla_with_its_core_clock_and_nvjpg_engines_apart():
    engines = source_with(FakeJtop()).read().engines
    assert engines["DLA0"] == EngineClock(online=True, freq_mhz=1600.0)
    assert engines["DLA1"] == EngineClock(online=False, freq_mhz=None)
    assert engines["PVA0"] == EngineClock(online=False, freq_mhz=None)
    assert engines["NVJPG"] == EngineClock(online=True, freq_mhz=345.6)
    assert engines["NVJPG1"] == EngineClock(online=False, freq_mhz=None)
    assert "DLA0_FALCON" not in engines
    assert sorted(engines) == [
        "APE", "DLA0", "DLA1", "NVDEC", "NVENC", "NVJPG", "NVJPG1", "OFA", "PVA0", "SE", "VIC",
    ]  # fmt: skip


def test_an_offline_core_is_none_and_jetson_clocks_on_is_true():
    jetson = FakeJtop()
    jetson.cpu["cpu"][11] = {"online": False, "governor": "schedutil", "freq": {}, "info_freq": {}}
    jetson.jetson_clocks = FakeJetsonClocks(True)
    jetson.nvpmodel = FakeNVPModel("MODE_30W", 2)
    sample = source_with(jetson).read()
    assert sample.cpu_per_core_pct[11] is None
    assert (sample.nvpmodel, sample.nvpmodel_id, sample.jetson_clocks) == ("MODE_30W", 2, True)


def test_a_board_without_fan_power_nvpmodel_or_gpu_reports_none_not_zero():
    jetson = FakeJtop()
    jetson.fan = {}
    jetson.power = {}
    jetson.gpu = {}
    jetson.nvpmodel = None
    jetson.jetson_clocks = None
    del jetson.memory["EMC"]
    sample = source_with(jetson).read()
    assert (sample.fan_pct, sample.power, sample.total_power_mw, sample.gpu) == (
        None,
        {},
        None,
        None,
    )
    assert (sample.nvpmodel, sample.nvpmodel_id, sample.jetson_clocks, sample.emc_pct) == (
        None,
        None,
        None,
        None,
    )


def test_a_read_raises_what_jtops_thread_caught_and_a_stopped_client_is_an_error():
    jetson = FakeJtop()
    source = source_with(jetson)
    jetson.fail_with = EOFError("Lost connection with jtop server")
    with pytest.raises(EOFError, match="Lost connection"):
        source.read()
    jetson.fail_with = None
    jetson.running = False
    with pytest.raises(RuntimeError, match="jtop: the client stopped"):
        source.read()


def test_a_service_that_refuses_makes_the_source_unavailable():
    def refuse():
        raise RuntimeError(
            "The jtop.service is not active. Please run:\nsudo systemctl restart jtop.service"
        )

    with pytest.raises(
        SourceUnavailable, match=r"cannot connect to jtop\.service: The jtop\.service is not active"
    ):
        JtopSource(refuse)


def test_close_closes_the_client():
    jetson = FakeJtop()
    source_with(jetson).close()
    assert jetson.closed


def test_core_and_emc_clocks_in_mhz_and_an_offline_cores_clock_is_none():
    jetson = FakeJtop()
    jetson.cpu["cpu"][11] = {"online": False, "governor": "schedutil", "freq": {}, "info_freq": {}}
    sample = source_with(jetson).read()
    assert sample.cpu_freq_mhz == (2188.8,) * 11 + (None,)
    assert sample.emc_freq_mhz == 3199.0
