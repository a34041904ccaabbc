"""Triton's ``--allow-gpu-metrics`` / ``--allow-cpu-metrics`` in edgebox:
``allow_gpu_metrics`` false leaves every ``nv_gpu_*`` family out of
``/metrics``, ``allow_cpu_metrics`` false every ``nv_cpu_*`` (as Triton 2.51
does); edgebox's own telemetry families stay."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from edgebox.daemon import Daemon
from edgebox.dashboard.settings import DashboardSettings
from edgebox.metrics.collector import MetricsCollector
from edgebox.metrics.telemetry_families import telemetry_families
from edgebox.settings import Settings
from edgebox.telemetry.sample import GpuSample, PowerRail, TelemetrySample
from fakes.fake_metrics_sources import FakeTelemetrySampler

SAMPLE = TelemetrySample(
    timestamp=1_700_000_000.0,
    source="jtop",
    cpu_pct=25.0,
    memory_used_bytes=6_000_000_000,
    memory_total_bytes=32_000_000_000,
    gpu=GpuSample(load_pct=42.0, freq_mhz=1300.0, memory_used_bytes=None),
    temperatures_c={"cpu": 48.5},
    power={"VDD_GPU_SOC": PowerRail(voltage_mv=5000.0, current_ma=1000.0, power_mw=4500.0)},
)
GPU = {
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
}
CPU = {"nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"}
OWN = {"edgebox_temperature_celsius", "edgebox_power_rail_watts"}


def names(families) -> set[str]:
    return {family.name for family in families if family.samples}


def test_gpu_and_cpu_families_can_each_be_left_out():
    assert names(telemetry_families(SAMPLE)) >= GPU | CPU | OWN
    without_gpu = names(telemetry_families(SAMPLE, gpu=False))
    assert not without_gpu & GPU
    assert without_gpu >= CPU | OWN
    without_cpu = names(telemetry_families(SAMPLE, cpu=False))
    assert not without_cpu & CPU
    assert without_cpu >= GPU | OWN


def test_collector_passes_the_switches_to_the_telemetry_families():
    collector = MetricsCollector(
        None, telemetry=FakeTelemetrySampler(SAMPLE), custom=None, gpu=False, cpu=False
    )
    assert names(collector.collect()) == OWN


def test_daemon_leaves_out_the_families_its_settings_turn_off(tmp_path: Path):
    settings = Settings(
        model_repository=tmp_path,
        host="127.0.0.1",
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        dashboard=DashboardSettings(enabled=False),
        allow_gpu_metrics=False,
        allow_cpu_metrics=False,
        state_directory=tmp_path / "state",
    )
    daemon = Daemon(settings)
    daemon.telemetry = FakeTelemetrySampler(SAMPLE)
    daemon._start_metrics()
    try:
        url = f"http://127.0.0.1:{daemon.metrics.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
    finally:
        daemon.metrics.stop()
    scraped = names(text_string_to_metric_families(text))
    assert not scraped & (GPU | CPU)
    assert scraped >= OWN
