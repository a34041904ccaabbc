"""Fakes of the parts of the ``tensorrt`` module and of ``pycuda.driver`` that
``edgebox build-engine`` uses, for tests on machines without a GPU.

``FakeTensorRT`` is handed to ``build_engine(..., tensorrt=...)`` in place of
the module. Its ONNX parser reads the real ONNX file with the ``onnx`` package
(inputs, outputs and one layer per node), so the network the command sees is
the file's. Its builder records everything it was given (flags, profiles, DLA
settings, calibration batches as the bytes found in fake device memory) in
``FakeTensorRT.builds`` and "serializes" to bytes that spell those settings.
It also behaves as TensorRT does where the command relies on it: the ONNX
parser of 8.x needs an explicit-batch network and 10.x has no EXPLICIT_BATCH
flag; a DLA build without GPU fallback fails on a layer the DLA cannot run;
placement is logged as ``[DlaLayer]`` / ``[GpuLayer]`` lines at INFO; the
calibrator is asked for its cache first and for batches only without one
(or, with ``reject_calibration_cache``, when TensorRT finds the cache stale).

``FakeCudaDriver`` stands in for ``pycuda.driver``: device name and compute
capability, a primary context whose push/pop is recorded, and device memory
as a dict of bytes that refuses use while no context is current.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from fakes.fake_tensorrt_runtime import FakeILogger, FakeSeverity


class FakeDataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    INT64 = 6


class FakeBuilderFlag(enum.Enum):
    FP16 = 0
    INT8 = 1
    GPU_FALLBACK = 2


class FakeDeviceType(enum.Enum):
    GPU = 0
    DLA = 1


class FakeMemoryPoolType(enum.Enum):
    WORKSPACE = 0


class FakeCreationFlags8(enum.IntEnum):
    EXPLICIT_BATCH = 0


class FakeCreationFlags10(enum.IntEnum):
    """TensorRT 10 as the brief describes it: no EXPLICIT_BATCH member."""

    STRONGLY_TYPED = 1


class FakeIInt8EntropyCalibrator2:
    def __init__(self) -> None:
        pass


_ONNX_TYPES = {
    onnx.TensorProto.FLOAT: FakeDataType.FLOAT,
    onnx.TensorProto.FLOAT16: FakeDataType.HALF,
    onnx.TensorProto.INT8: FakeDataType.INT8,
    onnx.TensorProto.UINT8: FakeDataType.UINT8,
    onnx.TensorProto.INT32: FakeDataType.INT32,
    onnx.TensorProto.INT64: FakeDataType.INT64,
    onnx.TensorProto.BOOL: FakeDataType.BOOL,
}

_LAYER_KINDS = {
    "Conv": "CONVOLUTION",
    "Relu": "ACTIVATION",
    "Resize": "RESIZE",
    "Reshape": "SHUFFLE",
    "Transpose": "SHUFFLE",
    "Shape": "SHAPE",
    "Concat": "CONCATENATION",
    "Add": "ELEMENTWISE",
    "Sub": "ELEMENTWISE",
    "Mul": "ELEMENTWISE",
}


@dataclass(frozen=True)
class FakeLayerType:
    name: str


@dataclass
class FakeTensor:
    name: str
    shape: tuple[int, ...]
    dtype: FakeDataType


@dataclass
class FakeLayer:
    name: str
    type: FakeLayerType


@dataclass
class FakeNetwork:
    flags: int
    inputs: list[FakeTensor] = field(default_factory=list)
    outputs: list[FakeTensor] = field(default_factory=list)
    layers: list[FakeLayer] = field(default_factory=list)

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def get_input(self, index: int) -> FakeTensor:
        return self.inputs[index]

    def get_output(self, index: int) -> FakeTensor:
        return self.outputs[index]

    def get_layer(self, index: int) -> FakeLayer:
        return self.layers[index]


class FakeParserError:
    def __init__(self, desc: str, node: int = -1) -> None:
        self._desc = desc
        self._node = node

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def code(self) -> int:
        return 8


class FakeParserError10(FakeParserError):
    """TensorRT 10's parser errors also name the node and its operator."""

    def __init__(self, desc: str, node: int, node_name: str, node_operator: str) -> None:
        super().__init__(desc, node)
        self._name = node_name
        self._operator = node_operator

    def node_name(self) -> str:
        return self._name

    def node_operator(self) -> str:
        return self._operator


class FakeOnnxParser:
    def __init__(self, tensorrt: FakeTensorRT, network: FakeNetwork, logger: Any) -> None:
        self._trt = tensorrt
        self._network = network
        self._errors: list[FakeParserError] = []

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> FakeParserError:
        return self._errors[index]

    def parse_from_file(self, path: str) -> bool:
        self._trt.parsed_paths.append(path)
        if self._trt.major < 10 and not self._network.flags & (1 << 0):
            self._errors.append(
                FakeParserError("The ONNX parser only supports networks with an explicit batch")
            )
            return False
        try:
            model = onnx.load(path)
        except Exception:
            self._errors.append(FakeParserError(f"Failed to parse ONNX model from file: {path}"))
            return False
        graph = model.graph
        for index, node in enumerate(graph.node):
            if node.op_type in self._trt.unsupported_ops:
                desc = f"No importer registered for op: {node.op_type}"
                if self._trt.major >= 10:
                    self._errors.append(FakeParserError10(desc, index, node.name, node.op_type))
                else:
                    self._errors.append(FakeParserError(desc, index))
        if self._errors:
            return False
        weights = {initializer.name for initializer in graph.initializer}
        self._network.inputs = [_tensor(v) for v in graph.input if v.name not in weights]
        self._network.outputs = [_tensor(v) for v in graph.output]
        self._network.layers = [
            FakeLayer(
                node.name or f"{node.op_type}_{index}",
                FakeLayerType(_LAYER_KINDS.get(node.op_type, node.op_type.upper())),
            )
            for index, node in enumerate(graph.node)
        ]
        return True


def _tensor(value: onnx.ValueInfoProto) -> FakeTensor:
    tensor_type = value.type.tensor_type
    shape = tuple(d.dim_value if d.dim_value > 0 else -1 for d in tensor_type.shape.dim)
    return FakeTensor(value.name, shape, _ONNX_TYPES[tensor_type.elem_type])


class FakeOptimizationProfile:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple[tuple[int, ...], ...]] = {}

    def set_shape(self, name: str, low: Any, opt: Any, high: Any) -> None:
        self.shapes[name] = (tuple(low), tuple(opt), tuple(high))


class FakeBuilderConfig:
    def __init__(self, tensorrt: FakeTensorRT) -> None:
        self._trt = tensorrt
        self.flags: set[str] = set()
        self.memory_pool_limits: dict[str, int] = {}
        self.profiles: list[FakeOptimizationProfile] = []
        self.calibration_profile: FakeOptimizationProfile | None = None
        self.int8_calibrator: Any = None
        self.default_device_type = FakeDeviceType.GPU
        self.DLA_core = -1

    def set_flag(self, flag: FakeBuilderFlag) -> None:
        self.flags.add(flag.name)

    def set_memory_pool_limit(self, pool: FakeMemoryPoolType, size: int) -> None:
        self.memory_pool_limits[pool.name] = size

    def add_optimization_profile(self, profile: FakeOptimizationProfile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def set_calibration_profile(self, profile: FakeOptimizationProfile) -> bool:
        self.calibration_profile = profile
        return True

    def can_run_on_DLA(self, layer: FakeLayer) -> bool:
        precision = bool(self.flags & {"FP16", "INT8"})
        return precision and layer.type.name not in self._trt.dla_unsupported_kinds


@dataclass
class FakeBuildRecord:
    """What ``build_serialized_network`` was given."""

    network_flags: int
    flags: set[str]
    memory_pool_limits: dict[str, int]
    profiles: list[dict[str, tuple[tuple[int, ...], ...]]]
    calibration_profile: dict[str, tuple[tuple[int, ...], ...]] | None
    default_device_type: str
    dla_core: int
    calibration_batches: list[dict[str, bytes]] = field(default_factory=list)
    calibration_cache_read: bytes | None = None


class FakeBuilder:
    def __init__(self, tensorrt: FakeTensorRT, logger: Any) -> None:
        self._trt = tensorrt
        self._logger = logger
        tensorrt.loggers.append(logger)

    @property
    def num_DLA_cores(self) -> int:
        return self._trt.dla_cores

    def create_network(self, flags: int = 0) -> FakeNetwork:
        self._trt.network_flags.append(flags)
        return FakeNetwork(flags)

    def create_builder_config(self) -> FakeBuilderConfig:
        return FakeBuilderConfig(self._trt)

    def create_optimization_profile(self) -> FakeOptimizationProfile:
        return FakeOptimizationProfile()

    def build_serialized_network(self, network: FakeNetwork, config: FakeBuilderConfig) -> Any:
        record = FakeBuildRecord(
            network_flags=network.flags,
            flags=set(config.flags),
            memory_pool_limits=dict(config.memory_pool_limits),
            profiles=[dict(p.shapes) for p in config.profiles],
            calibration_profile=(
                dict(config.calibration_profile.shapes) if config.calibration_profile else None
            ),
            default_device_type=config.default_device_type.name,
            dla_core=config.DLA_core,
        )
        self._trt.builds.append(record)
        if "INT8" in config.flags and config.int8_calibrator is not None:
            self._calibrate(network, config.int8_calibrator, record)
        dla = config.default_device_type is FakeDeviceType.DLA
        if dla:
            on_dla = [layer for layer in network.layers if config.can_run_on_DLA(layer)]
            on_gpu = [layer for layer in network.layers if layer not in on_dla]
            if on_gpu and "GPU_FALLBACK" not in config.flags:
                self._log(
                    FakeSeverity.ERROR,
                    f"{on_gpu[0].name}: layer cannot run on DLA and GPU fallback is disabled",
                )
                return None
            self._log(FakeSeverity.INFO, "---------- Layers Running on DLA ----------")
            if on_dla:
                self._log(
                    FakeSeverity.INFO,
                    f"[DlaLayer] {{ForeignNode[{on_dla[0].name}...{on_dla[-1].name}]}}",
                )
            self._log(FakeSeverity.INFO, "---------- Layers Running on GPU ----------")
            for layer in on_gpu:
                self._log(FakeSeverity.INFO, f"[GpuLayer] {layer.type.name}: {layer.name}")
        if self._trt.build_error is not None:
            self._log(FakeSeverity.ERROR, self._trt.build_error)
            return None
        summary = {
            "tensorrt": self._trt.__version__,
            "flags": sorted(record.flags),
            "device": record.default_device_type,
            "dla_core": record.dla_core,
            "profiles": [{k: list(v) for k, v in p.items()} for p in record.profiles],
        }
        return b"FAKE-TENSORRT-PLAN\n" + json.dumps(summary, sort_keys=True).encode()

    def _calibrate(self, network: FakeNetwork, calibrator: Any, record: FakeBuildRecord) -> None:
        assert calibrator.get_batch_size() == 1, "explicit batch: the calibrator answers 1"
        cache = calibrator.read_calibration_cache()
        if cache:
            record.calibration_cache_read = bytes(cache)
            if not self._trt.reject_calibration_cache:
                return
        names = [tensor.name for tensor in network.inputs]
        for _ in range(10_000):
            pointers = calibrator.get_batch(names)
            if not pointers:
                break
            assert len(pointers) == len(names)
            record.calibration_batches.append(
                {
                    name: self._trt.cuda.read(pointer)
                    for name, pointer in zip(names, pointers, strict=True)
                }
            )
        calibrator.write_calibration_cache(
            f"fake-entropy-cache: {len(record.calibration_batches)} batches\n".encode()
        )

    def _log(self, severity: FakeSeverity, message: str) -> None:
        self._logger.log(severity, message)


class FakeTensorRT:
    """Stands in for ``import tensorrt``; the attributes the command reads
    have TensorRT's names. Configure what the "device" and "TensorRT" do
    through the constructor; read what happened from ``builds``."""

    ILogger = FakeILogger
    DataType = FakeDataType
    BuilderFlag = FakeBuilderFlag
    DeviceType = FakeDeviceType
    MemoryPoolType = FakeMemoryPoolType
    IInt8EntropyCalibrator2 = FakeIInt8EntropyCalibrator2

    def __init__(
        self,
        cuda: FakeCudaDriver,
        version: str = "8.6.2.3",
        dla_cores: int = 2,
        dla_unsupported_kinds: frozenset[str] = frozenset(),
        unsupported_ops: frozenset[str] = frozenset(),
        build_error: str | None = None,
        reject_calibration_cache: bool = False,
    ) -> None:
        self.__version__ = version
        self.major = int(version.split(".")[0])
        self.NetworkDefinitionCreationFlag = (
            FakeCreationFlags8 if self.major < 10 else FakeCreationFlags10
        )
        self.cuda = cuda
        self.dla_cores = dla_cores
        self.dla_unsupported_kinds = dla_unsupported_kinds
        self.unsupported_ops = unsupported_ops
        self.build_error = build_error
        self.reject_calibration_cache = reject_calibration_cache
        self.builds: list[FakeBuildRecord] = []
        self.network_flags: list[int] = []
        self.parsed_paths: list[str] = []
        self.loggers: list[Any] = []
        self.plugins_initialized = 0

    def init_libnvinfer_plugins(self, logger: Any, namespace: str) -> bool:
        self.plugins_initialized += 1
        return True

    def Builder(self, logger: Any) -> FakeBuilder:
        return FakeBuilder(self, logger)

    def OnnxParser(self, network: FakeNetwork, logger: Any) -> FakeOnnxParser:
        return FakeOnnxParser(self, network, logger)


class FakeCudaContext:
    def __init__(self, driver: FakeCudaDriver) -> None:
        self._driver = driver

    def push(self) -> None:
        self._driver.context_events.append("push")
        self._driver.current_depth += 1

    def pop(self) -> None:
        self._driver.context_events.append("pop")
        self._driver.current_depth -= 1

    def detach(self) -> None:
        self._driver.context_events.append("detach")


class FakeCudaDevice:
    def __init__(self, driver: FakeCudaDriver, ordinal: int) -> None:
        self._driver = driver
        self.ordinal = ordinal

    def name(self) -> str:
        return self._driver.device_name

    def compute_capability(self) -> tuple[int, int]:
        return self._driver.capability

    def retain_primary_context(self) -> FakeCudaContext:
        return FakeCudaContext(self._driver)


class FakeDeviceAllocation:
    def __init__(self, driver: FakeCudaDriver, handle: int, nbytes: int) -> None:
        self._driver = driver
        self.handle = handle
        self.nbytes = nbytes

    def __int__(self) -> int:
        return self.handle

    def free(self) -> None:
        self._driver.require_context("free")
        self._driver.memory.pop(self.handle)
        self._driver.freed.append(self.handle)


class FakeCudaDriver:
    """Stands in for ``import pycuda.driver``."""

    def __init__(
        self,
        device_name: str = "Orin",
        capability: tuple[int, int] = (8, 7),
        init_error: Exception | None = None,
    ) -> None:
        self.device_name = device_name
        self.capability = capability
        self.init_error = init_error
        self.memory: dict[int, bytearray] = {}
        self.freed: list[int] = []
        self.context_events: list[str] = []
        self.current_depth = 0
        self._next_handle = 0x7F00_0000

    def init(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def Device(self, ordinal: int) -> FakeCudaDevice:
        return FakeCudaDevice(self, ordinal)

    def mem_alloc(self, nbytes: int) -> FakeDeviceAllocation:
        self.require_context("mem_alloc")
        handle = self._next_handle
        self._next_handle += max(nbytes, 1) + 256
        self.memory[handle] = bytearray(nbytes)
        return FakeDeviceAllocation(self, handle, nbytes)

    def memcpy_htod(self, dest: FakeDeviceAllocation, src: np.ndarray) -> None:
        self.require_context("memcpy_htod")
        data = np.ascontiguousarray(src).tobytes()
        buffer = self.memory[int(dest)]
        assert len(data) == len(buffer), f"copy of {len(data)} bytes into {len(buffer)}"
        buffer[:] = data

    def read(self, pointer: int) -> bytes:
        """What a kernel would find at ``pointer``: the test's view of device memory."""
        return bytes(self.memory[pointer])

    def require_context(self, what: str) -> None:
        if self.current_depth <= 0:
            raise RuntimeError(f"fake pycuda: {what} without a current CUDA context")


def fake_plan_summary(plan: bytes) -> dict[str, Any]:
    """The settings a plan written by ``FakeBuilder`` spells."""
    header, _, body = plan.partition(b"\n")
    assert header == b"FAKE-TENSORRT-PLAN", plan[:40]
    return json.loads(body)
