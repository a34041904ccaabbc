"""The sampler's ring: bounded, newest last, readable from any thread; a
failing read is skipped and logged, never the end of the thread; thermal
changes and MQTT snapshots go to the bus."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from daemon_process import wait_for
from edgebox.events import EventBus, TelemetrySnapshot, ThermalChanged
from edgebox.telemetry.sample import DeviceInfo, GpuSample, TelemetrySample
from edgebox.telemetry.sampler import Telemetry, snapshot_of
from edgebox.telemetry.thermal_guard import ThermalGuard


class FakeSource:
    """Returns samples 1, 2, 3... (timestamp = count); raises on the reads
    listed in ``fail_on``."""

    name = "fake"

    def __init__(self, fail_on: tuple[int, ...] = (), temperature_c: float = 40.0) -> None:
        self.reads = 0
        self.fail_on = fail_on
        self.temperature_c = temperature_c
        self.closed = False

    def device_info(self) -> DeviceInfo:
        return DeviceInfo(model="fake board", cpu_cores=2, has_gpu=True)

    def read(self) -> TelemetrySample:
        self.reads += 1
        if self.reads in self.fail_on:
            raise OSError(f"read {self.reads} failed")
        return TelemetrySample(
            timestamp=float(self.reads),
            source="fake",
            cpu_pct=10.0,
            cpu_per_core_pct=(5.0, None),
            gpu=GpuSample(load_pct=50.0, freq_mhz=1300.5),
            temperatures_c={"tj": self.temperature_c},
        )

    def close(self) -> None:
        self.closed = True


def test_the_ring_keeps_only_history_s_over_interval_s_samples_newest_last():
    telemetry = Telemetry(FakeSource(), interval_s=1.0, history_s=5)
    assert telemetry.latest() is None
    assert telemetry.history() == []
    for _ in range(8):
        telemetry.sample_once()
    assert [s.timestamp for s in telemetry.history()] == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert telemetry.latest().timestamp == 8.0


def test_history_of_n_seconds_is_the_samples_up_to_n_seconds_before_the_newest():
    telemetry = Telemetry(FakeSource(), interval_s=1.0, history_s=100)
    for _ in range(10):
        telemetry.sample_once()
    assert [s.timestamp for s in telemetry.history(3)] == [7.0, 8.0, 9.0, 10.0]
    assert len(telemetry.history(None)) == 10


def test_history_is_a_snapshot_the_sampler_does_not_change_afterwards():
    telemetry = Telemetry(FakeSource(), interval_s=1.0, history_s=3)
    telemetry.sample_once()
    taken = telemetry.history()
    telemetry.sample_once()
    assert [s.timestamp for s in taken] == [1.0]


def test_device_is_the_sources_device_info():
    assert Telemetry(FakeSource()).device == DeviceInfo(
        model="fake board", cpu_cores=2, has_gpu=True
    )


def test_a_failing_read_is_skipped_and_logged_once_a_minute_and_the_thread_goes_on(caplog):
    source = FakeSource(fail_on=(2, 3, 4))
    telemetry = Telemetry(source, interval_s=0.1, history_s=10)
    with caplog.at_level(logging.WARNING, logger="edgebox.telemetry"):
        telemetry.start()
        try:
            wait_for(lambda: source.reads >= 6, what="six reads")
        finally:
            assert telemetry.stop(5.0)
    assert [s.timestamp for s in telemetry.history()][:3] == [1.0, 5.0, 6.0]
    assert telemetry.read_failures == 3
    failures = [r.getMessage() for r in caplog.records if "read failed" in r.getMessage()]
    assert failures == ["telemetry: fake read failed: OSError: read 2 failed"]
    assert source.closed


def test_stop_ends_the_thread_and_a_stopped_sampler_can_be_read():
    telemetry = Telemetry(FakeSource(), interval_s=0.1)
    telemetry.start()
    wait_for(lambda: telemetry.latest() is not None, what="the first sample")
    assert telemetry.stop(5.0)
    assert not telemetry.running
    assert telemetry.latest().source == "fake"


def test_thermal_changes_are_published_on_the_bus():
    bus = EventBus()
    subscription = bus.subscribe(ThermalChanged)
    guard = ThermalGuard(warn_c=85.0, critical_c=95.0, hysteresis_c=5.0)
    telemetry = Telemetry(FakeSource(temperature_c=96.0), bus=bus, thermal=guard)
    telemetry.sample_once()
    telemetry.sample_once()
    assert subscription.get(timeout=0) == ThermalChanged("tj", "critical", 96.0, 95.0, 1.0)
    assert subscription.get(timeout=0) is None


def test_a_snapshot_is_published_every_mqtt_interval_s_of_sample_time():
    bus = EventBus()
    subscription = bus.subscribe(TelemetrySnapshot)
    telemetry = Telemetry(FakeSource(), interval_s=1.0, bus=bus, mqtt_interval_s=3.0)
    for _ in range(7):
        telemetry.sample_once()
    published = [subscription.get(timeout=0) for _ in range(3)]
    assert [event.timestamp for event in published if event] == [1.0, 4.0, 7.0]


def test_no_snapshot_is_published_when_mqtt_interval_s_is_0():
    bus = EventBus()
    subscription = bus.subscribe(TelemetrySnapshot)
    telemetry = Telemetry(FakeSource(), bus=bus, mqtt_interval_s=0)
    telemetry.sample_once()
    assert subscription.get(timeout=0) is None


def test_a_snapshot_carries_every_field_of_the_sample():
    sample = FakeSource().read()
    snapshot = snapshot_of(sample)
    sample_fields = {f.name for f in dataclasses.fields(TelemetrySample)}
    assert {f.name for f in dataclasses.fields(TelemetrySnapshot)} == sample_fields
    assert snapshot.gpu == {"load_pct": 50.0, "freq_mhz": 1300.5, "memory_used_bytes": None}
    assert snapshot.as_dict()["cpu_per_core_pct"] == [5.0, None]


@pytest.mark.parametrize(("interval_s", "history_s"), [(0.0, 10.0), (1.0, 0.5)])
def test_an_interval_or_history_that_cannot_make_a_ring_is_refused(interval_s, history_s):
    with pytest.raises(ValueError, match="telemetry: expected"):
        Telemetry(FakeSource(), interval_s=interval_s, history_s=history_s)


def test_retime_takes_the_next_sample_at_the_new_interval_without_waiting_out_the_old():
    source = FakeSource()
    telemetry = Telemetry(source, interval_s=60.0, history_s=600)
    telemetry.start()
    try:
        wait_for(lambda: source.reads >= 1, what="the first read")
        telemetry.retime(0.1, 10.0, 0.0)
        wait_for(lambda: source.reads >= 3, 5, what="reads at the new interval")
    finally:
        assert telemetry.stop(5.0)
    assert telemetry.interval_s == 0.1


def test_retime_resizes_the_ring_keeping_the_newest_samples():
    telemetry = Telemetry(FakeSource(), interval_s=1.0, history_s=10)
    for _ in range(8):
        telemetry.sample_once()
    telemetry.retime(1.0, 3.0, 0.0)
    assert [s.timestamp for s in telemetry.history()] == [6.0, 7.0, 8.0]
    telemetry.sample_once()
    assert [s.timestamp for s in telemetry.history()] == [7.0, 8.0, 9.0]
