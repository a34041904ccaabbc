"""A fake Jetson for the TensorRT backend's tests: ``FakePycudaDriver`` and
``FakeTensorRTRuntime`` handed to ``Backend(runtimes=...)``, and model folders
under ``tmp_path`` whose ``model.plan`` the fake runtime deserializes.

Device profiles (jtop's idea): an AGX Orin (2 DLA cores) by default, an Orin
Nano (no DLA) on request. Every instance a test loads is closed at teardown,
and teardown checks what each test relies on: every context retained was
detached, and no CUDA call ever ran on a thread without a current context.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.tensorrt.backend import Backend
from edgebox.backends.tensorrt.instance import TensorRTInstance
from edgebox.repository.config import read_model_config
from fakes.fake_tensorrt_runtime import (
    FakeEngineSpec,
    FakePycudaDriver,
    FakeTensorRTRuntime,
    fake_runtimes,
)

DEVICES = {
    "agx_orin": {"device_name": "Orin", "dla_cores": 2},
    "orin_nano": {"device_name": "Orin", "dla_cores": 0},
}


@dataclass
class FakeJetson:
    root: Path
    cuda: FakePycudaDriver
    trt: FakeTensorRTRuntime
    backend: Backend
    instances: list[TensorRTInstance] = field(default_factory=list)

    def write_model(
        self,
        name: str,
        config: str = 'platform: "tensorrt_plan"\n',
        spec: FakeEngineSpec | None = None,
        plan: bytes | None = None,
        sidecar: dict | None = None,
        version: int = 1,
    ) -> Path:
        model_dir = self.root / name
        version_dir = model_dir / str(version)
        version_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "config.pbtxt").write_text(textwrap.dedent(config))
        if plan is None:
            plan = self.trt.serialize(spec or FakeEngineSpec())
        (version_dir / "model.plan").write_bytes(plan)
        if sidecar is not None:
            (version_dir / "engine_build.json").write_text(json.dumps(sidecar))
        return model_dir

    def context(self, name: str, version: int = 1) -> ModelContext:
        model_dir = self.root / name
        config = read_model_config(model_dir)
        return ModelContext(name, version, config, model_dir, model_dir / str(version))

    def load(
        self, name: str, *instances: InstanceSpec, complete: bool = True
    ) -> tuple[ModelContext, list[TensorRTInstance]]:
        """complete_config, then load_instance per spec (one GPU instance of
        group '<name>_0' when none are given), and unload when one fails, as
        the lifecycle manager does."""
        context = self.context(name)
        if complete:
            self.backend.complete_config(context)
        specs = instances or (InstanceSpec(f"{name}_0_0", "GPU", 0),)
        loaded = []
        try:
            for spec in specs:
                instance = self.backend.load_instance(context, spec)
                self.instances.append(instance)
                loaded.append(instance)
        except BaseException:
            self.backend.unload(context)
            raise
        return context, loaded

    def close_all(self) -> None:
        for instance in self.instances:
            instance.close()
        self.instances.clear()

    def thread_names(self, *kinds: str) -> set[str]:
        return {e[0] for e in self.cuda.events if not kinds or e[1] in kinds}


def make_jetson(root: Path, profile: str = "agx_orin", version: str = "8.6.2.3") -> FakeJetson:
    device = DEVICES[profile]
    cuda = FakePycudaDriver(device_name=device["device_name"])
    trt = FakeTensorRTRuntime(cuda, version=version, dla_cores=device["dla_cores"])
    return FakeJetson(root, cuda, trt, Backend(runtimes=fake_runtimes(trt)))


@pytest.fixture
def jetson(tmp_path: Path):
    board = make_jetson(tmp_path / "models")
    yield board
    board.close_all()
    assert board.cuda.retained == 0, "a retained context was never detached"
    assert not [e for e in board.cuda.events if e[1] == "no-context"], (
        "CUDA was called on a thread without a current context"
    )


@pytest.fixture
def orin_nano(tmp_path: Path):
    board = make_jetson(tmp_path / "models", "orin_nano")
    yield board
    board.close_all()
    assert board.cuda.retained == 0
