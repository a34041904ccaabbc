"""Stand-ins for the telemetry sampler and the MQTT forwarder, as the
dashboard reads them (``edgebox/dashboard/deps.py``)."""

from __future__ import annotations

from edgebox.mqtt.link_stats import MqttStats
from edgebox.telemetry.sample import DeviceInfo, GpuSample, TelemetrySample

FAKE_ORIN = DeviceInfo(
    model="NVIDIA Jetson AGX Orin Developer Kit",
    l4t="36.3.0",
    jetpack="6.0",
    cpu_cores=12,
    memory_total_bytes=64 << 30,
    has_gpu=True,
    dla_cores=2,
)


def fake_sample(timestamp: float, cpu_pct: float = 20.0) -> TelemetrySample:
    return TelemetrySample(
        timestamp=timestamp,
        source="sysfs",
        cpu_pct=cpu_pct,
        gpu=GpuSample(load_pct=40.0, freq_mhz=918.0),
        temperatures_c={"tj": 51.5},
        nvpmodel="MAXN",
    )


class FakeTelemetry:
    """Holds the samples it is given; ``history(s)`` keeps those within ``s``
    of the newest, oldest first, as the sampler's ring does."""

    def __init__(self, samples: list[TelemetrySample], device: DeviceInfo = FAKE_ORIN) -> None:
        self.samples = samples
        self.device = device

    def latest(self) -> TelemetrySample | None:
        return self.samples[-1] if self.samples else None

    def history(self, seconds: float) -> list[TelemetrySample]:
        if not self.samples:
            return []
        newest = self.samples[-1].timestamp
        return [s for s in self.samples if newest - s.timestamp <= seconds]


class FakeMqttForwarder:
    def __init__(self, stats: MqttStats) -> None:
        self._stats = stats

    def stats(self) -> MqttStats:
        return self._stats
