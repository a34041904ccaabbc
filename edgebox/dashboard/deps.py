"""What the dashboard is built from: the daemon's parts, passed in by the
composition root (or by a test), never looked up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from edgebox.alerts.alert import Alert
from edgebox.events import EventBus, StreamStatus
from edgebox.log_ring import LogRing
from edgebox.mqtt.link_stats import MqttStats
from edgebox.streams.health import StreamHealthReport
from edgebox.streams.latest_frames import LatestFrames
from edgebox.telemetry.sample import DeviceInfo, TelemetrySample

if TYPE_CHECKING:
    from edgebox.dataplane import DataPlane
    from edgebox.history.sampler import HistorySampler
    from edgebox.lifecycle.registry import ModelRegistry
    from edgebox.repository_control import RepositoryControl


class TelemetrySource(Protocol):
    """The telemetry sampler as the dashboard reads it; every call returns
    what the sampler's thread already took, so none does IO."""

    @property
    def device(self) -> DeviceInfo: ...

    def latest(self) -> TelemetrySample | None: ...

    def history(self, seconds: float) -> Sequence[TelemetrySample]:
        """The samples of the last ``seconds``, oldest first."""
        ...


class AlertsSource(Protocol):
    def snapshot(self) -> Sequence[Alert]:
        """The active alerts, critical first; no IO."""
        ...


class MqttStatsSource(Protocol):
    def stats(self) -> MqttStats: ...


class StreamStatusSource(Protocol):
    def status(self) -> list[StreamStatus]: ...


class StreamHealthSource(Protocol):
    def health(self) -> list[StreamHealthReport]: ...


@dataclass(frozen=True)
class DashboardDeps:
    dataplane: DataPlane
    """Statistics."""
    repository_control: RepositoryControl
    """Load, unload, rollback, restore and the repository index."""
    registry: ModelRegistry
    """Served versions' configs and load notes."""
    bus: EventBus
    """The events page's source (one subscription)."""
    control_mode: str
    """none, poll or explicit: which model actions the pages offer."""
    streams: StreamStatusSource | None = None
    telemetry: TelemetrySource | None = None
    """None when telemetry is off."""
    mqtt: MqttStatsSource | None = None
    """None when MQTT is off."""
    frames: LatestFrames | None = None
    """Each stream's latest frame and result (``StreamManager.latest_frames``)."""
    logs: LogRing | None = None
    """The daemon's recent log records (the Logs page); None: none are kept."""
    history: HistorySampler | None = None
    """The downsampled record of request figures and telemetry (the History
    page, ``/api/v1/history``); None: history is off."""
    stream_health: StreamHealthSource | None = None
    """Each stream's health and recent rates (``StreamManager.health``)."""
    alerts: AlertsSource | None = None
    """The active alerts (the banner); None when alerts are off."""
