"""Prometheus families from one telemetry sample: Triton's ``nv_gpu_*`` and
``nv_cpu_*`` names, and edgebox's own for temperatures, power rails and
engines.

On a Jetson the GPU is integrated: its gauges carry ``gpu_uuid="integrated"``
(it has no NVML UUID), its memory is the shared RAM (what CUDA's
``cudaMemGetInfo`` reports there), and its power is the INA3221 rail that feeds
it, shared with other units (``VDD_GPU_SOC`` on AGX Orin, ``VDD_CPU_GPU_CV``
on Orin Nano), so it overstates the GPU alone. A figure telemetry does not know
is left out, never exported as 0: a machine without a GPU has no ``nv_gpu_*``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from edgebox.telemetry.sample import TelemetrySample

INTEGRATED_GPU_UUID = "integrated"
"""The ``gpu_uuid`` label of a Jetson's iGPU, stable across boots and devices."""


def telemetry_families(
    sample: TelemetrySample, gpu: bool = True, cpu: bool = True
) -> Iterator[Metric]:
    """Every family the sample has figures for (empty ones are dropped by the
    collector); ``gpu`` / ``cpu`` false leave out the ``nv_gpu_*`` /
    ``nv_cpu_*`` ones (Triton's ``--allow-gpu-metrics`` / ``--allow-cpu-metrics``)."""
    if gpu:
        yield from _gpu_gauges(sample)
    if cpu:
        yield from _cpu_gauges(sample)
    temperatures = GaugeMetricFamily(
        "edgebox_temperature_celsius", "Temperature per thermal zone", labels=["zone"]
    )
    for zone, celsius in sample.temperatures_c.items():
        temperatures.add_metric([zone], celsius)
    yield temperatures
    rails = GaugeMetricFamily(
        "edgebox_power_rail_watts", "Power drawn through each monitored rail", labels=["rail"]
    )
    for rail, reading in sample.power.items():
        if reading.power_mw is not None:
            rails.add_metric([rail], reading.power_mw / 1000)
    yield rails
    if sample.total_power_mw is not None:
        yield GaugeMetricFamily(
            "edgebox_power_total_watts",
            "Power drawn by the whole module",
            sample.total_power_mw / 1000,
        )
    online = GaugeMetricFamily(
        "edgebox_engine_online",
        "1 while a fixed-function engine (DLA, PVA...) is powered",
        labels=["engine"],
    )
    clocks = GaugeMetricFamily(
        "edgebox_engine_clock_hz", "Clock of a fixed-function engine", labels=["engine"]
    )
    for engine, clock in sample.engines.items():
        online.add_metric([engine], 1 if clock.online else 0)
        if clock.freq_mhz is not None:
            clocks.add_metric([engine], clock.freq_mhz * 1_000_000)
    yield online
    yield clocks
    if sample.emc_pct is not None:
        yield GaugeMetricFamily(
            "edgebox_emc_utilization",
            "External memory controller utilization rate [0.0 - 1.0]",
            sample.emc_pct / 100,
        )


def _cpu_gauges(sample: TelemetrySample) -> Iterator[Metric]:
    if sample.cpu_pct is not None:
        yield GaugeMetricFamily(
            "nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", sample.cpu_pct / 100
        )
    if sample.memory_total_bytes is not None:
        yield GaugeMetricFamily(
            "nv_cpu_memory_total_bytes",
            "CPU total memory (RAM), in bytes",
            sample.memory_total_bytes,
        )
    if sample.memory_used_bytes is not None:
        yield GaugeMetricFamily(
            "nv_cpu_memory_used_bytes",
            "CPU used memory (RAM), in bytes",
            sample.memory_used_bytes,
        )


def _gpu_gauges(sample: TelemetrySample) -> Iterator[Metric]:
    gpu = sample.gpu
    if gpu is None:
        return
    labels = ["gpu_uuid"]
    uuid = [INTEGRATED_GPU_UUID]

    def gauge(name: str, help_text: str, value: float | None) -> Iterator[Metric]:
        if value is not None:
            family = GaugeMetricFamily(name, help_text, labels=labels)
            family.add_metric(uuid, value)
            yield family

    if gpu.load_pct is not None:
        yield from gauge(
            "nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", gpu.load_pct / 100
        )
    if gpu.memory_used_bytes is not None:
        used, total = gpu.memory_used_bytes, None
    else:
        used, total = sample.memory_used_bytes, sample.memory_total_bytes
    yield from gauge("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", total)
    yield from gauge("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", used)
    rail = next(
        (r for name, r in sample.power.items() if "GPU" in name and r.power_mw is not None), None
    )
    if rail is not None:
        yield from gauge("nv_gpu_power_usage", "GPU power usage in watts", rail.power_mw / 1000)
