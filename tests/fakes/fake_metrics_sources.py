"""Stand-ins for what the metrics collector reads besides the dataplane: the
telemetry sampler (``latest()``, ``device``), the stream manager
(``status()``) and the MQTT forwarder (``stats()``). Each returns what the test
set, so a scrape shows exactly those figures."""

from __future__ import annotations

from edgebox.events.stream_status import StreamState, StreamStatus
from edgebox.mqtt.link_stats import MqttStats
from edgebox.telemetry.sample import DeviceInfo, TelemetrySample


class FakeTelemetrySampler:
    def __init__(self, sample: TelemetrySample | None, device: DeviceInfo | None = None) -> None:
        self.sample = sample
        self._device = device or DeviceInfo(model="fake")

    def latest(self) -> TelemetrySample | None:
        return self.sample

    @property
    def device(self) -> DeviceInfo:
        return self._device


class FakeStreamManager:
    def __init__(self, statuses: list[StreamStatus]) -> None:
        self.statuses = statuses
        self.error: Exception | None = None
        """Raised by ``status()`` when set: a source that breaks mid-scrape."""

    def status(self) -> list[StreamStatus]:
        if self.error is not None:
            raise self.error
        return self.statuses


class FakeMqttForwarder:
    def __init__(self, stats: MqttStats) -> None:
        self._stats = stats

    def stats(self) -> MqttStats:
        return self._stats


def fake_stream_status(
    name: str, fps: float = 0.0, dropped: int = 0, failures: int = 0
) -> StreamStatus:
    return StreamStatus(
        name=name,
        source="synthetic:road",
        model="lane",
        state=StreamState.RUNNING,
        reason="",
        next_retry_at=None,
        reconnect_attempt=0,
        frames_captured=100,
        frames_inferred=90,
        frames_dropped=dropped,
        inference_failures=failures,
        reconnects=0,
        fps=fps,
        model_version="1",
        timestamp=1_700_000_000.0,
    )
