"""The ``tensorrt`` module as ``edgebox selftest`` uses it: one module that
both builds engines and runs them, for tests on machines without a GPU.

``FakeTensorRTBuildAndRun`` is ``FakeTensorRTRuntime`` (runtime, engines,
execution contexts over a ``FakePycudaDriver``, fake_tensorrt_runtime.py)
with the builder and ONNX parser of ``FakeTensorRT`` (fake_tensorrt_builder.py)
added. A plan its builder serializes deserializes to an engine whose inputs,
outputs and profile are the parsed network's; whose inspector lists the
layers where the build put them (the DLA-capable ones as one
``{ForeignNode[first...last]}`` with its copy to the DLA on a DLA build, the
rest by name, as TensorRT's inspector does); and whose answer to a run is
``answer(dla_core, feeds)``, so each test decides what each engine computes:
ONNX Runtime's answer, a slower one, or a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fakes.fake_tensorrt_builder import (
    FakeBuilder,
    FakeBuilderConfig,
    FakeBuilderFlag,
    FakeDeviceType,
    FakeIInt8EntropyCalibrator2,
    FakeMemoryPoolType,
    FakeNetwork,
    FakeOnnxParser,
    FakeTensorRT,
    fake_plan_summary,
)
from fakes.fake_tensorrt_runtime import (
    FakeEngineSpec,
    FakePycudaDriver,
    FakeTensorRTRuntime,
)
from fakes.fake_tensorrt_runtime import FakeTensor as FakeEngineTensor

Answer = Callable[[int | None, dict[str, np.ndarray]], dict[str, np.ndarray]]
"""(DLA core or None for the GPU, input arrays) -> output arrays."""


class FakeTensorRTBuildAndRun(FakeTensorRTRuntime):
    BuilderFlag = FakeBuilderFlag
    DeviceType = FakeDeviceType
    MemoryPoolType = FakeMemoryPoolType
    IInt8EntropyCalibrator2 = FakeIInt8EntropyCalibrator2

    def __init__(
        self,
        cuda: FakePycudaDriver,
        answer: Answer,
        version: str = "10.3.0",
        dla_cores: int = 2,
        dla_unsupported_kinds: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(cuda, version=version, dla_cores=dla_cores)
        self.answer = answer
        self.building = FakeTensorRT(
            cuda, version=version, dla_cores=dla_cores, dla_unsupported_kinds=dla_unsupported_kinds
        )
        """The builder side; its ``builds`` record what each build was given."""
        self.NetworkDefinitionCreationFlag = self.building.NetworkDefinitionCreationFlag

    def Builder(self, logger: Any) -> FakeBuildAndRunBuilder:
        return FakeBuildAndRunBuilder(self, FakeBuilder(self.building, logger))

    def OnnxParser(self, network: FakeNetwork, logger: Any) -> FakeOnnxParser:
        return self.building.OnnxParser(network, logger)


class FakeBuildAndRunBuilder:
    """``FakeBuilder`` whose plans the runtime side can deserialize."""

    def __init__(self, trt: FakeTensorRTBuildAndRun, inner: FakeBuilder) -> None:
        self._trt = trt
        self._inner = inner

    @property
    def num_DLA_cores(self) -> int:
        return self._inner.num_DLA_cores

    def create_network(self, flags: int = 0) -> FakeNetwork:
        return self._inner.create_network(flags)

    def create_builder_config(self) -> FakeBuilderConfig:
        return self._inner.create_builder_config()

    def create_optimization_profile(self) -> Any:
        return self._inner.create_optimization_profile()

    def build_serialized_network(self, network: FakeNetwork, config: FakeBuilderConfig) -> Any:
        plan = self._inner.build_serialized_network(network, config)
        if plan is None:
            return None
        summary = fake_plan_summary(plan)
        dla_core = summary["dla_core"] if summary["device"] == "DLA" else None
        if dla_core is None:
            layers = [layer.name for layer in network.layers]
        else:
            on_dla = [layer for layer in network.layers if config.can_run_on_DLA(layer)]
            layers = [layer.name for layer in network.layers if layer not in on_dla]
            if on_dla:
                first, last = on_dla[0].name, on_dla[-1].name
                layers = [f"{first} to nvm", f"{{ForeignNode[{first}...{last}]}}", *layers]
        answer = self._trt.answer

        def compute(feeds: dict[str, np.ndarray], outputs: list) -> dict[str, np.ndarray]:
            return answer(dla_core, feeds)

        spec = FakeEngineSpec(
            inputs=[FakeEngineTensor(t.name, t.dtype.name, t.shape) for t in network.inputs],
            outputs=[FakeEngineTensor(t.name, t.dtype.name, t.shape) for t in network.outputs],
            profiles=[
                {name: tuple(tuple(shape) for shape in shapes) for name, shapes in p.items()}
                for p in summary["profiles"]
            ],
            compute=compute,
            layers=layers,
        )
        return self._trt.serialize(spec)
