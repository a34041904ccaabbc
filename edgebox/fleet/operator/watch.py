"""Watching one wave converge: every device it reaches serving the version,
or the first one that rejects or fails it, or the wave's deadline.

Halting at the first rejection is the point of waves: the document stays at
the wave that failed, so the devices outside it never see the version. A
device that refused the document itself (a key it does not trust, say) will
never converge either, so it halts the deploy the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from edgebox.fleet.operator.broker import FleetBroker
from edgebox.fleet.operator.fleet_view import DeviceView, FleetTopics, group_view

FAILED_STATES = ("rejected", "failed")


@dataclass(frozen=True)
class WaveGoal:
    group: str
    model: str
    version: int
    generation: int
    devices: tuple[str, ...]


@dataclass(frozen=True)
class WaveOutcome:
    done: bool
    halted_by: str = ""
    """The device whose report halted the wave; empty when none did."""
    waiting_for: tuple[str, ...] = ()
    views: tuple[DeviceView, ...] = ()


def device_done(view: DeviceView | None, goal: WaveGoal) -> bool:
    if view is None or view.generation < goal.generation:
        return False
    report = view.model(goal.model)
    return report.state == "serving" and goal.version in report.served


def device_halts(view: DeviceView | None, goal: WaveGoal) -> bool:
    if view is None:
        return False
    refused = view.refused or {}
    if refused.get("generation") == goal.generation:
        return True
    return view.generation >= goal.generation and view.model(goal.model).state in FAILED_STATES


def judge(views: list[DeviceView], goal: WaveGoal) -> WaveOutcome:
    by_device = {view.device: view for view in views}
    waiting = []
    for device in goal.devices:
        view = by_device.get(device)
        if device_halts(view, goal):
            return WaveOutcome(False, device, (), tuple(views))
        if not device_done(view, goal):
            waiting.append(device)
    return WaveOutcome(not waiting, "", tuple(waiting), tuple(views))


def watch_wave(
    broker: FleetBroker, topics: FleetTopics, goal: WaveGoal, wait_s: float
) -> WaveOutcome:
    """Re-judged on every message the broker brings, until done, halted or
    ``wait_s`` passed (then ``done`` is False with nobody halting)."""
    deadline = time.monotonic() + wait_s
    while True:
        seen, retained = broker.snapshot()
        outcome = judge(group_view(retained, topics, goal.group), goal)
        left = deadline - time.monotonic()
        if outcome.done or outcome.halted_by or left <= 0:
            return outcome
        broker.wait_for_change(seen, min(left, 1.0))
