"""What the fleet agent reads of the device it runs on: which versions of a
model are ready, which one answers by default, which a rollout holds back and
why, and which failed to load; and the one thing it asks of the lifecycle:
the rollout policy for a model's next version.

The agent never loads or unloads anything itself: it changes the repository
folder (the truth in poll mode) and reads the outcome here, so the same
rollout gates and version policy decide as for a version copied in by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.lifecycle.states import ModelState
from edgebox.repository.rollout_policy import policy_from_mapping


@dataclass(frozen=True)
class VersionSeen:
    state: str
    """``serving`` (the default version), ``ready`` (loaded, not the
    default), ``held`` (a rollout rejected or quarantined it), ``failed``
    (UNAVAILABLE because it failed; one unloaded, by the version policy or
    an unload, is ``loading``: it comes back once its folder is the one the
    policy selects again), ``loading`` or ``absent``."""
    reason: str = ""


class DeviceView:
    def __init__(self, registry: ModelRegistry, rollouts: Rollouts) -> None:
        self._registry = registry
        self._rollouts = rollouts

    def ready_versions(self, model: str) -> list[int]:
        return sorted(self._registry.served_versions(model))

    def version(self, model: str, version: int) -> VersionSeen:
        held = self._rollouts.trials.held(model).get(version)
        if held is not None:
            return VersionSeen("held", held.reason)
        if version in self._registry.served_versions(model):
            return VersionSeen("serving" if self._default(model) == version else "ready")
        status = self._registry.statuses(model).get(version)
        if status is None:
            return VersionSeen("absent")
        if status.state is ModelState.UNAVAILABLE and not status.reason.startswith("unloaded"):
            return VersionSeen("failed", status.reason)
        return VersionSeen("loading", status.reason)

    def rolling_out(self, model: str) -> bool:
        """A rollout (shadow or canary) of the model is deciding now."""
        return self._rollouts.status(model).get("stage", "none") not in ("none", "watching")

    def set_policy(self, model: str, fields: dict | None) -> None:
        """The rollout policy the model's next version gets: ``fields`` over
        the device's ``rollout:`` default, in place of the model's own
        parameters (None: its own again). ValueError naming a bad field."""
        policy = (
            None if fields is None else policy_from_mapping(fields, self._rollouts.default_policy)
        )
        self._rollouts.set_policy_override(model, policy)

    def _default(self, model: str) -> int | None:
        """The registry's default is its highest served version (asking it
        through ``get`` could take a canary's turn)."""
        return max(self._registry.served_versions(model), default=None)
