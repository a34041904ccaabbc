"""A stack with rollouts on: the in-process registry, manager and dataplane
over a repository in tmp_path, with a state directory beside it, the
rollout thread running, and a way to start it again on the same disk (a
restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.backends import BackendCatalog
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus
from edgebox.events.rollout import RolloutEvent
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.rollout.rollouts import Rollouts
from edgebox.lifecycle.rollout.state_directory import open_state
from edgebox.repository.rollout_policy import RolloutPolicy
from edgebox.repository_control import RepositoryControl
from edgebox.tensors import InferRequest, Tensor
from rollout_models import add_sub_inputs


class RolloutStack:
    def __init__(self, repository: Path, state: Path, policy: RolloutPolicy, park: bool) -> None:
        self.bus = EventBus()
        self.events = self.bus.subscribe(RolloutEvent)
        self.registry = ModelRegistry(self.bus)
        parts = open_state(state)
        self.rollouts = Rollouts(
            self.registry, parts.store, parts.marks, self.bus, policy, park_rolled_back=park
        )
        self.manager = LifecycleManager(
            repository,
            self.registry,
            BackendCatalog(),
            infer=lambda r: self.dataplane.infer(r),
            rollouts=self.rollouts,
        )
        self.dataplane = DataPlane(self.registry)
        self.control = RepositoryControl(
            self.registry, self.manager, self.dataplane.live, "poll" if park else "explicit"
        )
        self.rollouts.recover()
        self.rollouts.start_thread()

    def add_sub(self, model: str = "add_sub", version: str = ""):
        """One add_sub request: (the version that answered, its OUTPUT0 is
        INPUT0 + INPUT1)."""
        a, b = add_sub_inputs()
        request = InferRequest(
            model, [Tensor("INPUT0", "FP32", a), Tensor("INPUT1", "FP32", b)], model_version=version
        )
        response = self.dataplane.infer(request)
        return response.model_version, bool((response.output("OUTPUT0").data == a + b).all())

    def state(self, model: str, version: int):
        return self.registry.statuses(model).get(version)

    def stop(self) -> None:
        self.manager.unload_all(timeout_s=10)


@pytest.fixture
def rollout_stack(tmp_path):
    """``rollout_stack(**policy)``: a stack whose device-wide rollout policy
    has these fields; calling it again is a restart on the same disk (the
    stack before it is stopped first, cleanly unless ``crashed=True``)."""
    stacks: list[RolloutStack] = []

    def build(crashed: bool = False, park: bool = False, **policy) -> RolloutStack:
        if stacks and not crashed:
            stacks[-1].stop()
        stack = RolloutStack(tmp_path / "models", tmp_path / "state", RolloutPolicy(**policy), park)
        stacks.append(stack)
        return stack

    (tmp_path / "models").mkdir()
    yield build
    for stack in stacks:
        stack.stop()
