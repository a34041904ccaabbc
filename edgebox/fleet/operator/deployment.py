"""A deploy or a rollback, start to end: read the group from the broker,
publish the signed desired state wave by wave, and stop at the first device
that rejects or fails the version, or at a wave's deadline.

Each wave is a new generation of the same document, its targets widened;
nothing else changes between waves. When a wave halts, nothing more is
published: the retained document keeps targeting that wave's devices, so
every other device stays on what it runs (``edgebox fleet rollback`` then
takes the wave's devices back).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edgebox.errors import EdgeboxError
from edgebox.fleet.document import (
    Desired,
    Targets,
    WantedModel,
    desired_topic,
    document_bytes,
    parse_document,
)
from edgebox.fleet.operator.broker import BrokerOptions, FleetBroker
from edgebox.fleet.operator.fleet_view import DeviceView, FleetTopics, group_view
from edgebox.fleet.operator.next_document import (
    Current,
    deploy_model,
    document_with,
    next_generation,
    read_current,
    rollback_model,
)
from edgebox.fleet.operator.table import device_rows, render
from edgebox.fleet.operator.watch import WaveGoal, watch_wave
from edgebox.fleet.operator.waves import Wave, wave_order, wave_targets
from edgebox.fleet.signing import Refused, sign_envelope

PUBLISH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FleetTarget:
    """Where the group lives: the broker, the topic prefix and the group."""

    broker: BrokerOptions
    prefix: str
    group: str
    settle_s: float = 1.0

    @property
    def desired_topic(self) -> str:
        return desired_topic(self.prefix, self.group)


class GroupSession:
    """The broker connection of one command, with what it saw on arrival."""

    def __init__(self, target: FleetTarget) -> None:
        self.target = target
        self.topics = FleetTopics(target.prefix)
        self.broker = FleetBroker(
            target.broker, [target.desired_topic, self.topics.reports, self.topics.statuses]
        )

    def __enter__(self) -> GroupSession:
        probe = f"{self.target.prefix}/fleet/{self.target.group}/operator/{uuid.uuid4().hex}"
        try:
            self.broker.connect(probe)
        except BaseException:
            self.broker.close()
            raise
        self.broker.settle(self.target.settle_s)
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.broker.close()

    def views(self) -> list[DeviceView]:
        _, retained = self.broker.snapshot()
        return group_view(retained, self.topics, self.target.group)

    def current(self, private_key: Ed25519PrivateKey) -> Current:
        _, retained = self.broker.snapshot()
        return read_current(retained.get(self.target.desired_topic), self.target.group, private_key)


Say = Callable[[str], None]


def _say(text: str) -> None:
    print(text, flush=True)


def _warn(text: str) -> None:
    print(f"edgebox: warning: {text}", file=sys.stderr, flush=True)


def deploy(
    target: FleetTarget,
    private_key: Ed25519PrivateKey,
    wanted: WantedModel,
    waves: list[Wave],
    wait_s: float,
    say: Say = _say,
    warn: Say = _warn,
) -> bool:
    """True once every device the last wave reaches serves the version.
    ``wanted``: the model, version, artifact and rollout (its targets and
    previous are filled in here)."""
    with GroupSession(target) as session:
        current = session.current(private_key)
        if current.warning:
            warn(current.warning)
        entry = deploy_model(
            current.desired,
            target.group,
            wanted.name,
            wanted.version,
            wanted.artifact,
            wanted.rollout,
        )
        devices = [view.device for view in session.views()]
        ordered = wave_order(target.group, wanted.name, devices)
        plan = _plan(waves, ordered)
        if not plan:
            raise EdgeboxError(
                f"no device of group '{target.group}' has reported on "
                f"'{session.topics.reports}', so no wave reaches one; end the waves with 100% "
                "to target every device, present and future"
            )
        if not devices:
            warn(
                f"no device of group '{target.group}' has reported yet; the document targets "
                "all of them, and they converge when they connect"
            )
        return _publish_waves(session, private_key, current.desired, entry, plan, wait_s, say)


def rollback(
    target: FleetTarget,
    private_key: Ed25519PrivateKey,
    model: str,
    rollout: dict | None,
    wait_s: float | None,
    say: Say = _say,
    warn: Say = _warn,
) -> bool:
    """Like ``deploy``, in one wave to all; ``wait_s`` None: publish and
    return True without watching."""
    with GroupSession(target) as session:
        current = session.current(private_key)
        if current.warning:
            warn(current.warning)
        entry = rollback_model(current.desired, model, rollout)
        devices = tuple(view.device for view in session.views())
        plan = [(Targets(all=True), devices)]
        if wait_s is None:
            document = _publish(session, private_key, current.desired, entry, plan[0][0])
            say(
                f"published generation {document.generation}: model '{model}' back to version "
                f"{entry.version} on every device of group '{target.group}'"
            )
            return True
        return _publish_waves(session, private_key, current.desired, entry, plan, wait_s, say)


def _plan(waves: list[Wave], ordered: list[str]) -> list[tuple[Targets, tuple[str, ...]]]:
    """Each wave's targets and the devices it reaches; a wave that reaches
    no more devices than the one before is dropped (a generation for
    nothing), unless it is the one targeting all."""
    plan: list[tuple[Targets, tuple[str, ...]]] = []
    for wave in waves:
        targets, reached = wave_targets(wave, ordered)
        if not targets.all and (not reached or (plan and reached == plan[-1][1])):
            continue
        plan.append((targets, reached))
        if targets.all:
            break
    return plan


def _publish(
    session: GroupSession,
    private_key: Ed25519PrivateKey,
    current: Desired | None,
    entry: WantedModel,
    targets: Targets,
) -> Desired:
    document = document_with(
        current, session.target.group, entry, targets, next_generation(current)
    )
    data = document_bytes(document)
    try:
        parse_document(data)
    except Refused as refusal:
        raise EdgeboxError(f"the new desired state would be refused: {refusal.reason}") from None
    session.broker.publish_retained(
        session.target.desired_topic, sign_envelope(data, private_key), PUBLISH_TIMEOUT_S
    )
    return document


def _publish_waves(
    session: GroupSession,
    private_key: Ed25519PrivateKey,
    current: Desired | None,
    entry: WantedModel,
    plan: list[tuple[Targets, tuple[str, ...]]],
    wait_s: float,
    say: Say,
) -> bool:
    group, model = session.target.group, entry.name
    for index, (targets, reached) in enumerate(plan, 1):
        current = _publish(session, private_key, current, entry, targets)
        reach = "all devices" if targets.all else ", ".join(reached)
        say(
            f"wave {index}/{len(plan)}: generation {current.generation}, model '{model}' "
            f"version {entry.version} to {reach}"
        )
        goal = WaveGoal(group, model, entry.version, current.generation, reached)
        outcome = watch_wave(session.broker, session.topics, goal, wait_s)
        table = render(device_rows(list(outcome.views), [model]))
        if outcome.halted_by:
            say(
                f"halted: device '{outcome.halted_by}' did not take version {entry.version} "
                f"(wave {index}); no further wave is published, the devices outside this "
                "wave keep what they run"
            )
            say(table)
            return False
        if not outcome.done:
            say(
                f"timed out after {wait_s:g}s in wave {index}: not serving version "
                f"{entry.version} yet: {_named(outcome.waiting_for, outcome.views)}"
            )
            say(table)
            return False
        say(f"wave {index}/{len(plan)}: {len(reached)} device(s) serve version {entry.version}")
    say(table)
    return True


def _named(devices: tuple[str, ...], views: tuple[DeviceView, ...]) -> str:
    status = {view.device: view.status for view in views}
    return ", ".join(f"{device} ({status.get(device, 'unknown')})" for device in devices)
