"""An in-process stack (registry, manager, dataplane, repository control) over
a repository in tmp_path, with real backends: lifecycle tests drive it without
HTTP."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.backends import BackendCatalog
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus, ModelStateChanged
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.repository_control import RepositoryControl
from edgebox.tensors import InferRequest, Tensor
from fakes import blocking_gate


class Stack:
    def __init__(self, repository):
        self.bus = EventBus()
        self.events = self.bus.subscribe(ModelStateChanged)
        self.registry = ModelRegistry(self.bus)
        self.manager = LifecycleManager(
            repository,
            self.registry,
            BackendCatalog(),
            infer=lambda r: self.dataplane.infer(r),
            infer_stream=lambda r, s: self.dataplane.infer_stream(r, s),
        )
        self.dataplane = DataPlane(self.registry)
        self.repository_control = RepositoryControl(
            self.registry, self.manager, self.dataplane.live, "explicit"
        )

    def infer(self, model: str, version: str = "", input_name: str = "X"):
        data = np.array([1.0, 2.0], dtype=np.float32)
        request = InferRequest(model, [Tensor(input_name, "FP32", data)], model_version=version)
        return self.dataplane.infer(request)


@pytest.fixture
def stack(tmp_path):
    blocking_gate.reset()
    stack = Stack(tmp_path)
    yield stack
    blocking_gate.release.set()
    stack.manager.unload_all(timeout_s=10)
