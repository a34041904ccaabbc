from __future__ import annotations

import pytest

from edgebox.backends import BackendCatalog
from edgebox.dataplane import DataPlane
from edgebox.lifecycle.limits import LoadLimits
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.repository_control import RepositoryControl
from fakes import blocking_gate
from inprocess_stack import Stack


@pytest.fixture
def limited_stack(tmp_path):
    """``limited_stack(**limits)``: the in-process stack with a manager held to
    these ``LoadLimits`` (the rest at their defaults)."""
    stacks: list[Stack] = []

    def build(**limits) -> Stack:
        stack = Stack(tmp_path)
        stack.manager = LifecycleManager(
            tmp_path,
            stack.registry,
            BackendCatalog(),
            infer=lambda r: stack.dataplane.infer(r),
            limits=LoadLimits(**limits),
        )
        stack.dataplane = DataPlane(stack.registry)
        stack.repository_control = RepositoryControl(
            stack.registry, stack.manager, stack.dataplane.live, "explicit"
        )
        stacks.append(stack)
        return stack

    blocking_gate.reset()
    yield build
    blocking_gate.release.set()
    for stack in stacks:
        stack.manager.unload_all(timeout_s=10)
