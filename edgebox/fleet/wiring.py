"""The fleet agent as the daemon builds it from the ``fleet:`` and ``mqtt:``
settings: which group and device it speaks for, the keys it trusts, where
downloads go, and the topic its desired state arrives on."""

from __future__ import annotations

from pathlib import Path

from edgebox.events import EventBus
from edgebox.fleet.agent import AgentSetup, FleetAgent
from edgebox.fleet.device_view import DeviceView
from edgebox.fleet.document import desired_topic
from edgebox.fleet.figures import FleetFigures
from edgebox.fleet.settings import FleetSettings
from edgebox.fleet.signing import TrustedKeys
from edgebox.fleet.state_store import FleetStore
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.mqtt.settings import MqttSettings


def build_agent(
    fleet: FleetSettings,
    mqtt: MqttSettings,
    repository: Path,
    state_directory: Path,
    registry: ModelRegistry,
    rollouts: Rollouts,
    bus: EventBus,
) -> tuple[FleetAgent, FleetFigures, str]:
    """The agent (not started), its figures for /metrics, and the topic to
    subscribe it to. Raises InvalidArgument for a trusted key file that is
    no Ed25519 public key."""
    figures = FleetFigures()
    setup = AgentSetup(
        group=fleet.group,
        device=mqtt.resolved_device_id,
        trusted=TrustedKeys.from_files(fleet.trusted_keys),
        repository=repository,
        download_dir=fleet.download_dir,
        max_artifact_bytes=fleet.artifact_max_bytes,
        ca_file=fleet.ca_file,
        publish=bus.publish,
    )
    agent = FleetAgent(setup, DeviceView(registry, rollouts), FleetStore(state_directory), figures)
    return agent, figures, desired_topic(mqtt.topic_prefix, fleet.group)
