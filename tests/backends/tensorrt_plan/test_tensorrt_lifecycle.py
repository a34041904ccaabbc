"""The TensorRT backend under the real lifecycle manager, registry and
dataplane (fake Jetson underneath): the layer placement reaches the model's metadata, the repository
index and the log, requests run through the dynamic batcher auto-complete
turned on, and unloading everything (the daemon's shutdown path) closes every
instance, so each CUDA context is popped and detached on its own thread."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.backends import BackendCatalog
from edgebox.backends.base import Backend
from edgebox.dataplane import DataPlane
from edgebox.dataplane_results import RepositoryIndexEntry
from edgebox.errors import Unavailable
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.lifecycle.states import ModelState
from edgebox.repository_control import RepositoryControl
from edgebox.tensors import InferRequest, Tensor
from fakes.fake_tensorrt_runtime import FakeEngineSpec


class CatalogWithFakeTensorRT(BackendCatalog):
    """The real catalog, except that ``tensorrt`` is the backend on the fake Jetson."""

    def __init__(self, tensorrt: Backend) -> None:
        super().__init__()
        self._tensorrt = tensorrt

    def get(self, name: str) -> Backend:
        return self._tensorrt if name == "tensorrt" else super().get(name)


@pytest.fixture
def served(jetson):
    registry = ModelRegistry()
    manager = LifecycleManager(
        jetson.root,
        registry,
        CatalogWithFakeTensorRT(jetson.backend),
        infer=lambda request: dataplane.infer(request),
        gpu_ids=[0],
    )
    dataplane = DataPlane(registry)
    yield manager, registry, dataplane
    manager.unload_all(timeout_s=10)


DLA_CONFIG = """
platform: "tensorrt_plan"
instance_group [
  { count: 2 kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA device_id: 0 } ] }
]
"""


def test_placement_reaches_the_metadata_the_index_and_the_log(jetson, served, caplog) -> None:
    manager, registry, dataplane = served
    layers = ["{ForeignNode[conv1...relu9]}", "Softmax_10"]
    jetson.write_model("lane", DLA_CONFIG, spec=FakeEngineSpec(layers=layers))
    caplog.set_level("INFO")
    manager.load_model("lane")
    note = "layer placement: DLA core 0: 1 layer; GPU fallback: 1 layer (Softmax_10)"
    status = registry.statuses("lane")[1]
    assert (status.state, status.reason) == (ModelState.READY, note)
    index = RepositoryControl(registry, manager, dataplane.live).repository_index()
    assert RepositoryIndexEntry("lane", "1", ModelState.READY, note) in index
    assert dataplane.model_metadata("lane").notes == (note,)
    assert f"model 'lane' version 1: READY ({note})" in caplog.text


def test_requests_run_through_the_batcher_auto_complete_turned_on(jetson, served) -> None:
    manager, registry, dataplane = served
    jetson.write_model("lane")
    manager.load_model("lane")
    assert registry.get("lane").config.HasField("dynamic_batching")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    response = dataplane.infer(InferRequest("lane", [Tensor("x", "FP32", x)]))
    np.testing.assert_array_equal(response.outputs[0].data, x * 2)


def test_unloading_everything_pops_and_detaches_every_context_on_its_thread(jetson, served) -> None:
    manager, registry, _ = served
    jetson.write_model("lane", DLA_CONFIG)
    manager.load_model("lane")
    assert jetson.cuda.retained == 2
    assert manager.unload_all(timeout_s=10)
    assert jetson.cuda.retained == 0
    by_thread: dict[str, list[str]] = {}
    for thread, kind, *_ in jetson.cuda.events:
        if kind in ("retain", "push", "pop", "detach"):
            by_thread.setdefault(thread, []).append(kind)
    assert by_thread == {
        "cuda-lane_1_lane_0_0": ["retain", "push", "pop", "detach"],
        "cuda-lane_1_lane_0_1": ["retain", "push", "pop", "detach"],
    }
    assert registry.statuses("lane")[1].state is ModelState.UNAVAILABLE


def test_failed_load_leaves_no_context_behind(jetson, served) -> None:
    manager, registry, _ = served
    jetson.write_model("lane", spec=FakeEngineSpec(tensorrt_version="10.3.0"))
    with pytest.raises(Unavailable, match=r"was serialized by TensorRT 10\.3\.0"):
        manager.load_model("lane")
    assert registry.statuses("lane")[1].state is ModelState.UNAVAILABLE
    assert jetson.cuda.retained == 0


def test_engine_without_a_config_loads_with_the_config_completed_from_it(jetson, served) -> None:
    manager, registry, dataplane = served
    (jetson.write_model("lane") / "config.pbtxt").unlink()
    manager.load_model("lane")
    config = registry.get("lane").config
    assert (config.name, config.platform, config.backend) == ("lane", "tensorrt_plan", "tensorrt")
    assert [t.name for t in config.input] == ["x"]
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    response = dataplane.infer(InferRequest("lane", [Tensor("x", "FP32", x)]))
    np.testing.assert_array_equal(response.outputs[0].data, x * 2)
