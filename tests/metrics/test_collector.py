"""The collector builds every metric at scrape time from state that already
exists: Triton's names, labels and help texts for the statistics and the
GPU/CPU gauges, edgebox's own under ``edgebox_``; a part whose source is
missing, or has no data yet, is left out rather than shown as zeros."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from edgebox.errors import EdgeboxError
from edgebox.events import EventBus, ModelStateChanged
from edgebox.metrics.collector import MetricsCollector
from edgebox.mqtt.link_stats import MqttStats
from edgebox.scheduling.statistics import LATENCY_BUCKET_BOUNDS_US
from edgebox.telemetry.sample import (
    DeviceInfo,
    EngineClock,
    GpuSample,
    PowerRail,
    TelemetrySample,
)
from edgebox.tensors import InferRequest, Tensor
from fakes.fake_metrics_sources import (
    FakeMqttForwarder,
    FakeStreamManager,
    FakeTelemetrySampler,
    fake_stream_status,
)
from model_fixtures import add_add_sub, write_model

TRITON_COUNTERS = {
    "nv_inference_request_success": "Number of successful inference requests, all batch sizes",
    "nv_inference_request_failure": "Number of failed inference requests, all batch sizes",
    "nv_inference_count": "Number of inferences performed (does not include cached requests)",
    "nv_inference_exec_count": (
        "Number of model executions performed (does not include cached requests)"
    ),
    "nv_inference_request_duration_us": (
        "Cumulative inference request duration in microseconds (includes cached requests)"
    ),
    "nv_inference_queue_duration_us": (
        "Cumulative inference queuing duration in microseconds (includes cached requests)"
    ),
    "nv_inference_compute_input_duration_us": (
        "Cumulative compute input duration in microseconds (does not include cached requests)"
    ),
    "nv_inference_compute_infer_duration_us": (
        "Cumulative compute inference duration in microseconds (does not include cached requests)"
    ),
    "nv_inference_compute_output_duration_us": (
        "Cumulative inference compute output duration in microseconds "
        "(does not include cached requests)"
    ),
}

AGX_ORIN_SAMPLE = TelemetrySample(
    timestamp=1_700_000_000.0,
    source="jtop",
    cpu_pct=25.0,
    cpu_per_core_pct=(20.0, 30.0),
    memory_used_bytes=6_000_000_000,
    memory_total_bytes=32_000_000_000,
    gpu=GpuSample(load_pct=42.0, freq_mhz=1300.0, memory_used_bytes=None),
    emc_pct=17.0,
    temperatures_c={"cpu": 48.5, "gpu": 47.0, "tj": 50.25},
    power={
        "VDD_GPU_SOC": PowerRail(voltage_mv=5000.0, current_ma=1000.0, power_mw=4500.0),
        "VDD_CPU_CV": PowerRail(voltage_mv=5000.0, current_ma=300.0, power_mw=1500.0),
        "VIN_SYS_5V0": PowerRail(voltage_mv=None, current_ma=None, power_mw=None),
    },
    total_power_mw=9000.0,
    engines={"DLA0": EngineClock(online=True, freq_mhz=1600.0), "DLA1": EngineClock(False)},
)
AGX_ORIN = DeviceInfo(model="NVIDIA Jetson AGX Orin", l4t="36.3.0", has_gpu=True, dla_cores=2)

NO_GPU_SAMPLE = TelemetrySample(
    timestamp=1_700_000_000.0,
    source="psutil",
    cpu_pct=50.0,
    memory_used_bytes=2_000_000_000,
    memory_total_bytes=8_000_000_000,
)

TELEMETRY_FAMILIES = {
    "nv_gpu_utilization",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_power_usage",
    "nv_cpu_utilization",
    "nv_cpu_memory_used_bytes",
    "nv_cpu_memory_total_bytes",
    "edgebox_temperature_celsius",
    "edgebox_power_rail_watts",
    "edgebox_power_total_watts",
    "edgebox_engine_online",
    "edgebox_engine_clock_hz",
    "edgebox_emc_utilization",
}


def scrape(collector: MetricsCollector) -> tuple[str, dict]:
    """The exposition text a scrape returns, and its families by name."""
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return text, {family.name: family for family in text_string_to_metric_families(text)}


def values(family) -> dict[tuple, float]:
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def _add_sub_request(width: int = 16) -> InferRequest:
    data = np.ones((1, width), dtype=np.float32)
    return InferRequest("add_sub", [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)])


@pytest.fixture
def served(tmp_path, stack):
    add_add_sub(tmp_path)
    stack.manager.load_model("add_sub")
    return stack


def test_statistics_become_triton_inference_metrics_per_version(served):
    for _ in range(3):
        served.dataplane.infer(_add_sub_request())
    with pytest.raises(EdgeboxError):
        served.dataplane.infer(_add_sub_request(width=5))

    text, families = scrape(MetricsCollector(served.dataplane, bus=served.bus))

    labels = (("model", "add_sub"), ("version", "1"))
    for name, help_text in TRITON_COUNTERS.items():
        assert families[name].documentation == help_text
        assert list(values(families[name])) == [labels]
    counts = {name: values(families[name])[labels] for name in TRITON_COUNTERS}
    assert counts["nv_inference_request_success"] == 3
    # The rejected request never reached the model: no failure, as Triton counts.
    assert counts["nv_inference_request_failure"] == 0
    assert counts["nv_inference_count"] == 3
    assert counts["nv_inference_exec_count"] == 3
    for name in TRITON_COUNTERS:
        if name.endswith("_duration_us") and name != "nv_inference_queue_duration_us":
            assert counts[name] > 0, name
    snapshot = served.dataplane.statistics("add_sub")[0].counts.inference_stats
    assert counts["nv_inference_request_duration_us"] == snapshot.success.ns // 1000
    # Triton's exact series names, so Triton's Grafana dashboards find them.
    assert 'nv_inference_request_success{model="add_sub",version="1"} 3.0' in text
    assert "nv_inference_request_success_total" not in text


def test_request_durations_become_a_cumulative_histogram_per_version(served):
    for _ in range(4):
        served.dataplane.infer(_add_sub_request())
    with pytest.raises(EdgeboxError):
        served.dataplane.infer(_add_sub_request(width=5))

    _, families = scrape(MetricsCollector(served.dataplane, bus=served.bus))

    family = families["edgebox_request_duration_seconds"]
    assert family.type == "histogram"
    assert family.documentation == (
        "End-to-end duration of successful inference requests in the scheduler, "
        "the time nv_inference_request_duration_us sums"
    )
    labels = {"model": "add_sub", "version": "1"}
    buckets = [
        (float(s.labels["le"]), s.value)
        for s in family.samples
        if s.name.endswith("_bucket") and {k: s.labels[k] for k in labels} == labels
    ]
    assert [le for le, _ in buckets[:-1]] == pytest.approx(
        [us / 1e6 for us in LATENCY_BUCKET_BOUNDS_US]
    )
    assert buckets[-1] == (float("inf"), 4)
    assert all(earlier <= later for (_, earlier), (_, later) in itertools.pairwise(buckets))
    snapshot = served.dataplane.statistics("add_sub")[0].counts
    by_name = {s.name: s.value for s in family.samples if s.labels == labels}
    assert by_name["edgebox_request_duration_seconds_count"] == 4
    assert by_name["edgebox_request_duration_seconds_sum"] == pytest.approx(
        snapshot.inference_stats.success.ns / 1e9
    )


def test_unavailable_models_are_flagged_with_their_version(tmp_path, served):
    write_model(tmp_path, "broken", "name: {")
    with pytest.raises(EdgeboxError):
        served.manager.load_model("broken")

    _, families = scrape(
        MetricsCollector(served.dataplane, served.repository_control, bus=served.bus)
    )

    assert values(families["edgebox_model_unavailable"]) == {
        (("model", "add_sub"), ("version", "1")): 0,
        (("model", "broken"), ("version", "")): 1,
    }


def test_jetson_telemetry_fills_triton_gpu_and_cpu_gauges_and_edgebox_ones(stack):
    telemetry = FakeTelemetrySampler(AGX_ORIN_SAMPLE, AGX_ORIN)

    _, families = scrape(MetricsCollector(stack.dataplane, telemetry=telemetry, bus=stack.bus))

    gpu = (("gpu_uuid", "integrated"),)
    assert values(families["nv_gpu_utilization"]) == {gpu: 0.42}
    assert families["nv_gpu_utilization"].documentation == "GPU utilization rate [0.0 - 1.0)"
    # The iGPU's memory is the shared RAM, as CUDA reports it on a Jetson.
    assert values(families["nv_gpu_memory_used_bytes"]) == {gpu: 6_000_000_000}
    assert values(families["nv_gpu_memory_total_bytes"]) == {gpu: 32_000_000_000}
    assert values(families["nv_gpu_power_usage"]) == {gpu: 4.5}
    assert values(families["nv_cpu_utilization"]) == {(): 0.25}
    assert families["nv_cpu_utilization"].documentation == "CPU utilization rate [0.0 - 1.0]"
    assert values(families["nv_cpu_memory_used_bytes"]) == {(): 6_000_000_000}
    assert values(families["nv_cpu_memory_total_bytes"]) == {(): 32_000_000_000}
    assert values(families["edgebox_temperature_celsius"]) == {
        (("zone", "cpu"),): 48.5,
        (("zone", "gpu"),): 47.0,
        (("zone", "tj"),): 50.25,
    }
    assert values(families["edgebox_power_rail_watts"]) == {
        (("rail", "VDD_GPU_SOC"),): 4.5,
        (("rail", "VDD_CPU_CV"),): 1.5,
    }
    assert values(families["edgebox_power_total_watts"]) == {(): 9.0}
    assert values(families["edgebox_engine_online"]) == {
        (("engine", "DLA0"),): 1,
        (("engine", "DLA1"),): 0,
    }
    assert values(families["edgebox_engine_clock_hz"]) == {(("engine", "DLA0"),): 1.6e9}
    assert values(families["edgebox_emc_utilization"]) == {(): 0.17}
    assert {f.type for name, f in families.items() if name in TELEMETRY_FAMILIES} == {"gauge"}


def test_orin_nano_gpu_power_comes_from_the_rail_it_shares():
    sample = TelemetrySample(
        timestamp=0.0,
        source="sysfs",
        cpu_pct=None,
        gpu=GpuSample(load_pct=None),
        power={
            "VDD_IN": PowerRail(5000.0, 1200.0, 6000.0),
            "VDD_CPU_GPU_CV": PowerRail(5000.0, 400.0, 2000.0),
        },
    )

    _, families = scrape(MetricsCollector(None, telemetry=FakeTelemetrySampler(sample)))

    assert values(families["nv_gpu_power_usage"]) == {(("gpu_uuid", "integrated"),): 2.0}
    assert "nv_gpu_utilization" not in families
    assert "nv_cpu_utilization" not in families


def test_a_machine_without_gpu_exports_no_gpu_metrics(stack):
    telemetry = FakeTelemetrySampler(NO_GPU_SAMPLE)

    _, families = scrape(MetricsCollector(stack.dataplane, telemetry=telemetry, bus=stack.bus))

    assert not [name for name in families if name.startswith("nv_gpu_")]
    assert values(families["nv_cpu_utilization"]) == {(): 0.5}
    assert values(families["nv_cpu_memory_used_bytes"]) == {(): 2_000_000_000}
    for absent in ("edgebox_emc_utilization", "edgebox_power_total_watts"):
        assert absent not in families


def test_no_telemetry_sample_yet_exports_no_telemetry_metrics(stack):
    telemetry = FakeTelemetrySampler(None)

    _, families = scrape(MetricsCollector(stack.dataplane, telemetry=telemetry, bus=stack.bus))

    assert not TELEMETRY_FAMILIES & set(families)


def test_streams_export_fps_drops_and_inference_failures(stack):
    streams = FakeStreamManager(
        [
            fake_stream_status("road", fps=29.5, dropped=4, failures=1),
            fake_stream_status("dock", fps=0.0, dropped=0, failures=0),
        ]
    )

    text, families = scrape(MetricsCollector(stack.dataplane, streams=streams, bus=stack.bus))

    assert values(families["edgebox_stream_fps"]) == {
        (("stream", "road"),): 29.5,
        (("stream", "dock"),): 0.0,
    }
    assert families["edgebox_stream_frames_dropped"].type == "counter"
    assert values(families["edgebox_stream_frames_dropped"]) == {
        (("stream", "road"),): 4,
        (("stream", "dock"),): 0,
    }
    assert values(families["edgebox_stream_inference_failures"]) == {
        (("stream", "road"),): 1,
        (("stream", "dock"),): 0,
    }
    assert 'edgebox_stream_frames_dropped_total{stream="road"} 4.0' in text


def test_mqtt_link_figures_are_exported(stack):
    stats = MqttStats(
        state="connected",
        broker="127.0.0.1:1883",
        spool_rows=12,
        spool_bytes=3400,
        oldest_unsent_age_s=7.5,
        sent=100,
        acknowledged=98,
        dropped={"telemetry": 3, "queue": 1},
    )

    text, families = scrape(
        MetricsCollector(stack.dataplane, mqtt=FakeMqttForwarder(stats), bus=stack.bus)
    )

    assert values(families["edgebox_mqtt_connected"]) == {(): 1}
    assert values(families["edgebox_mqtt_spool_messages"]) == {(): 12}
    assert values(families["edgebox_mqtt_spool_bytes"]) == {(): 3400}
    assert values(families["edgebox_mqtt_oldest_unsent_seconds"]) == {(): 7.5}
    assert values(families["edgebox_mqtt_sent"]) == {(): 100}
    assert values(families["edgebox_mqtt_acknowledged"]) == {(): 98}
    assert values(families["edgebox_mqtt_dropped"]) == {
        (("kind", "telemetry"),): 3,
        (("kind", "queue"),): 1,
    }
    for name in ("edgebox_mqtt_sent_total", "edgebox_mqtt_acknowledged_total 98.0"):
        assert name in text


def test_a_disconnected_link_with_an_empty_spool_reads_zero(stack):
    stats = MqttStats(state="refused", broker="127.0.0.1:1883")

    _, families = scrape(
        MetricsCollector(stack.dataplane, mqtt=FakeMqttForwarder(stats), bus=stack.bus)
    )

    assert values(families["edgebox_mqtt_connected"]) == {(): 0}
    assert values(families["edgebox_mqtt_oldest_unsent_seconds"]) == {(): 0}


def test_event_bus_drops_are_counted():
    bus = EventBus()
    subscription = bus.subscribe(ModelStateChanged, max_events=1)
    for version in range(3):
        bus.publish(ModelStateChanged("m", version, "READY", ""))

    text, families = scrape(MetricsCollector(None, bus=bus))

    assert families["edgebox_event_drops"].type == "counter"
    assert values(families["edgebox_event_drops"]) == {(): 2}
    assert "edgebox_event_drops_total 2.0" in text
    subscription.close()


def test_parts_without_a_source_are_left_out():
    _, families = scrape(MetricsCollector(None))

    assert families == {}


def test_a_failing_source_leaves_the_rest_of_the_scrape(stack, caplog):
    streams = FakeStreamManager([])
    streams.error = RuntimeError("stream table torn")
    telemetry = FakeTelemetrySampler(NO_GPU_SAMPLE)
    collector = MetricsCollector(
        stack.dataplane, telemetry=telemetry, streams=streams, bus=stack.bus
    )

    with caplog.at_level(logging.ERROR, logger="edgebox.metrics"):
        _, families = scrape(collector)

    assert "nv_cpu_utilization" in families
    assert "edgebox_event_drops" in families
    assert not [name for name in families if name.startswith("edgebox_stream_")]
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: reading streams failed; left out of this scrape: RuntimeError: stream table torn"
    ]
