"""events/ is the one event contract: the bus, and every event that travels on
it to MQTT, the dashboard and the log.

Invariant: publishing never blocks the publisher (an inference, stream or load
thread). Each subscriber has a bounded queue that drops its oldest event, and
counts it, when the subscriber falls behind. Every event is a frozen dataclass
whose ``as_dict()`` is its JSON payload, opening with its schema's name and
version. events/ imports nothing else from edgebox, so every layer may use it.
"""

from edgebox.events.alert import AlertEvent
from edgebox.events.bus import EventBus, Subscription
from edgebox.events.event import Event
from edgebox.events.fleet import FleetDocumentRefused, FleetModelChanged, FleetReported
from edgebox.events.model_result import ModelResult
from edgebox.events.model_state import ModelStateChanged
from edgebox.events.mqtt_link import MqttLinkChanged
from edgebox.events.rollout import (
    ModelQuarantined,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    RolloutStarted,
)
from edgebox.events.spool import SpoolDegraded, SpoolDropped
from edgebox.events.stream_result import StreamLatency, StreamResult
from edgebox.events.stream_status import ResultLatency, StreamState, StreamStatus
from edgebox.events.telemetry import TelemetrySnapshot
from edgebox.events.thermal import ThermalChanged

OCCURRENCES = (
    ModelStateChanged,
    StreamStatus,
    MqttLinkChanged,
    SpoolDropped,
    SpoolDegraded,
    ThermalChanged,
    RolloutStarted,
    RolloutProgress,
    RolloutPromoted,
    RolloutRejected,
    RolloutRolledBack,
    ModelQuarantined,
    FleetDocumentRefused,
    FleetModelChanged,
    AlertEvent,
)
"""Things that happened, as opposed to data (results, telemetry snapshots):
what MQTT's ``events`` topic and the dashboard's events page carry."""

__all__ = [
    "OCCURRENCES",
    "AlertEvent",
    "Event",
    "EventBus",
    "FleetDocumentRefused",
    "FleetModelChanged",
    "FleetReported",
    "ModelQuarantined",
    "ModelResult",
    "ModelStateChanged",
    "MqttLinkChanged",
    "ResultLatency",
    "RolloutProgress",
    "RolloutPromoted",
    "RolloutRejected",
    "RolloutRolledBack",
    "RolloutStarted",
    "SpoolDegraded",
    "SpoolDropped",
    "StreamLatency",
    "StreamResult",
    "StreamState",
    "StreamStatus",
    "Subscription",
    "TelemetrySnapshot",
    "ThermalChanged",
]
