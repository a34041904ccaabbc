"""Fakes of the ``tensorrt`` runtime API (8.5+ named tensors) and of
``pycuda.driver``, for the TensorRT backend's tests on machines without a GPU.

``FakeTensorRTRuntime`` stands in for the ``tensorrt`` module and
``FakePycudaDriver`` for ``pycuda.driver``; ``fake_runtimes()`` pairs them
into the ``Runtimes`` the backend takes in its constructor. They behave as the
real ones do where the backend relies on it:

- every CUDA-touching call (allocations, copies, streams, runtime, engine,
  execution context) raises pycuda's "invalid device context - no currently
  active context?" unless a context is current on the calling thread, so a
  backend that ran CUDA work off its instance's thread fails here too;
- device memory is bytes the fake engine really reads its inputs from and
  writes its outputs to, at the addresses given by ``set_tensor_address``;
- ``deserialize_cuda_engine`` returns None after logging TensorRT's own error
  lines for a plan from another TensorRT version, another compute capability,
  with a plugin whose creator is not registered, or that is no plan at all;
- ``runtime.DLA_core`` is recorded when the engine is deserialized;
- plugin libraries register their creators when opened (as a real library's
  static initializers do), and ``init_libnvinfer_plugins`` is recorded.

``events`` (shared by both fakes) records what happened, in order, with the
name of the thread it happened on.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgebox.backends.tensorrt.backend import Runtimes

PLAN_MAGIC = b"FAKE-TENSORRT-PLAN:"
NO_CONTEXT = "invalid device context - no currently active context?"


class FakeCudaError(RuntimeError):
    """What pycuda raises (pycuda._driver.LogicError and friends)."""


# -- pycuda.driver ---------------------------------------------------------


class FakePycudaDriver:
    """``pycuda.driver`` for one (or more) fake GPUs."""

    def __init__(
        self,
        device_name: str = "Orin",
        compute_capability: tuple[int, int] = (8, 7),
        device_count: int = 1,
        init_error: str | None = None,
        events: list | None = None,
    ) -> None:
        self.device_name = device_name
        self.compute_capability = compute_capability
        self.device_count = device_count
        self.init_error = init_error
        self.events: list[tuple[str, ...]] = events if events is not None else []
        self.memory: dict[int, bytearray] = {}
        self.retained = 0
        self.initialized = False
        self._addresses = itertools.count(0x1000, 0x1000)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.Device = _FakeDeviceFactory(self)

    def record(self, *event: object) -> None:
        with self._lock:
            self.events.append((threading.current_thread().name, *map(str, event)))

    def init(self) -> None:
        if self.init_error:
            raise FakeCudaError(self.init_error)
        self.initialized = True

    def current_context(self) -> FakeContext | None:
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    def require_context(self, what: str) -> FakeContext:
        context = self.current_context()
        if context is None:
            self.record("no-context", what)
            raise FakeCudaError(f"{what} failed: {NO_CONTEXT}")
        return context

    def context_stack(self) -> list:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def Stream(self) -> FakeStream:
        self.require_context("Stream")
        return FakeStream(self)

    def mem_alloc(self, nbytes: int) -> FakeDeviceAllocation:
        self.require_context("mem_alloc")
        address = next(self._addresses)
        self.memory[address] = bytearray(nbytes)
        self.record("mem_alloc", nbytes)
        return FakeDeviceAllocation(self, address, nbytes)

    def pagelocked_empty(self, shape, dtype) -> np.ndarray:
        self.require_context("pagelocked_empty")
        count = math.prod(shape) if isinstance(shape, tuple) else int(shape)
        allocation = FakeHostAllocation(self, count * np.dtype(dtype).itemsize)
        return np.asarray(allocation).view(dtype).reshape(shape)

    def memcpy_htod_async(self, dest, src: np.ndarray, stream: FakeStream) -> None:
        self.require_context("memcpy_htod_async")
        _require_pinned(src)
        stream.check()
        data = np.ascontiguousarray(src).view(np.uint8).reshape(-1)
        target = self.memory[int(dest)]
        if len(data) > len(target):
            raise FakeCudaError(f"memcpy_htod_async: {len(data)} bytes into {len(target)}")
        target[: len(data)] = data.tobytes()
        self.record("htod", len(data))

    def memcpy_dtoh_async(self, dest: np.ndarray, src, stream: FakeStream) -> None:
        self.require_context("memcpy_dtoh_async")
        _require_pinned(dest)
        stream.check()
        source = self.memory[int(src)]
        flat = dest.reshape(-1).view(np.uint8)
        if flat.nbytes > len(source):
            raise FakeCudaError(f"memcpy_dtoh_async: {flat.nbytes} bytes from {len(source)}")
        flat[...] = np.frombuffer(bytes(source[: flat.nbytes]), dtype=np.uint8)
        self.record("dtoh", flat.nbytes)


class _FakeDeviceFactory:
    def __init__(self, driver: FakePycudaDriver) -> None:
        self._driver = driver

    def __call__(self, index: int) -> FakeDevice:
        if not self._driver.initialized:
            raise FakeCudaError("cuInit has not been called")
        return FakeDevice(self._driver, index)

    def count(self) -> int:
        if not self._driver.initialized:
            raise FakeCudaError("cuInit has not been called")
        return self._driver.device_count


class FakeDevice:
    def __init__(self, driver: FakePycudaDriver, index: int) -> None:
        self._driver = driver
        self.index = index

    def name(self) -> str:
        return self._driver.device_name

    def compute_capability(self) -> tuple[int, int]:
        return self._driver.compute_capability

    def retain_primary_context(self) -> FakeContext:
        self._driver.retained += 1
        self._driver.record("retain", self.index)
        return FakeContext(self._driver, self.index)


class FakeContext:
    def __init__(self, driver: FakePycudaDriver, device: int) -> None:
        self._driver = driver
        self.device = device
        self.detached = False

    def push(self) -> None:
        self._driver.context_stack().append(self)
        self._driver.record("push", self.device)

    def pop(self) -> None:
        stack = self._driver.context_stack()
        if not stack or stack[-1] is not self:
            raise FakeCudaError("cannot pop non-current context")
        stack.pop()
        self._driver.record("pop", self.device)

    def detach(self) -> None:
        if self.detached:
            raise FakeCudaError("cannot detach from invalid context")
        self.detached = True
        self._driver.retained -= 1
        self._driver.record("detach", self.device)


class FakeStream:
    _handles = itertools.count(1)

    def __init__(self, driver: FakePycudaDriver) -> None:
        self._driver = driver
        self.context = driver.current_context()
        self.handle = next(self._handles)

    def check(self) -> None:
        if self._driver.current_context() is not self.context:
            raise FakeCudaError("stream used outside the context it was made in")

    def synchronize(self) -> None:
        self._driver.require_context("Stream.synchronize")
        self._driver.record("synchronize")


class FakeDeviceAllocation:
    def __init__(self, driver: FakePycudaDriver, address: int, nbytes: int) -> None:
        self._driver = driver
        self.address = address
        self.nbytes = nbytes
        self.freed = False

    def __int__(self) -> int:
        return self.address

    def free(self) -> None:
        self._driver.require_context("DeviceAllocation.free")
        self.freed = True
        self._driver.memory.pop(self.address, None)
        self._driver.record("free", self.nbytes)


class FakeHostAllocation:
    """Page-locked host memory: numpy arrays made from it have it as ``.base``."""

    def __init__(self, driver: FakePycudaDriver, nbytes: int) -> None:
        self._driver = driver
        self._storage = np.zeros(nbytes, dtype=np.uint8)
        self.__array_interface__ = self._storage.__array_interface__
        self.freed = False

    def free(self) -> None:
        self._driver.require_context("HostAllocation.free")
        self.freed = True
        self._driver.record("free-host", self._storage.nbytes)


def _require_pinned(array: np.ndarray) -> None:
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if not isinstance(base, FakeHostAllocation):
        raise FakeCudaError("async copy from pageable memory (not from pagelocked_empty)")


# -- tensorrt ----------------------------------------------------------------


class FakeSeverity(enum.Enum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


class FakeILogger:
    Severity = FakeSeverity

    def __init__(self) -> None:
        pass


FakeDataType = enum.Enum("DataType", "FLOAT HALF BF16 INT8 UINT8 INT32 INT64 BOOL FP8")
FakeTensorIOMode = enum.Enum("TensorIOMode", "NONE INPUT OUTPUT")
FakeTensorLocation = enum.Enum("TensorLocation", "DEVICE HOST")
FakeTensorFormat = enum.Enum("TensorFormat", "LINEAR CHW4 CHW16 DLA_LINEAR DLA_HWC4")
FakeLayerInformationFormat = enum.Enum("LayerInformationFormat", "ONELINE JSON")

_NUMPY_BY_TYPE = {
    "FLOAT": np.float32,
    "HALF": np.float16,
    "BF16": np.uint16,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
}


@dataclass
class FakeTensor:
    name: str
    dtype: str = "FLOAT"
    shape: tuple[int, ...] = (-1, 4)
    location: str = "DEVICE"
    format: str = "LINEAR"


def _double(feeds: dict[str, np.ndarray], outputs: list[FakeTensor]) -> dict[str, np.ndarray]:
    first = next(iter(feeds.values()))
    return {o.name: (first * 2).astype(_NUMPY_BY_TYPE[o.dtype]) for o in outputs}


@dataclass
class FakeEngineSpec:
    """What a fake plan deserializes to."""

    inputs: list[FakeTensor] = field(default_factory=lambda: [FakeTensor("x")])
    outputs: list[FakeTensor] = field(default_factory=lambda: [FakeTensor("y")])
    profiles: list[dict[str, tuple[tuple[int, ...], ...]]] = field(
        default_factory=lambda: [{"x": ((1, 4), (4, 4), (8, 4))}]
    )
    """Per profile: dynamic input name -> (min, opt, max)."""
    compute: Callable[[dict[str, np.ndarray], list[FakeTensor]], dict[str, np.ndarray]] = _double
    """Outputs from inputs; an output's -1 dims take the first input's size there."""
    layers: list[Any] = field(default_factory=lambda: ["conv1 + relu1", "fc"])
    """The inspector's "Layers"."""
    tensorrt_version: str | None = None
    """None: the fake runtime's own version."""
    compute_capability: str = "8.7"
    plugins: list[str] = field(default_factory=list)
    """Plugin creators the engine needs."""


class FakeTensorRTRuntime:
    """The ``tensorrt`` module, as far as the runtime side of the backend uses it."""

    ILogger = FakeILogger
    DataType = FakeDataType
    TensorIOMode = FakeTensorIOMode
    TensorLocation = FakeTensorLocation
    TensorFormat = FakeTensorFormat
    LayerInformationFormat = FakeLayerInformationFormat

    def __init__(
        self,
        cuda: FakePycudaDriver,
        version: str = "8.6.2.3",
        dla_cores: int = 2,
        plugin_libraries: dict[str, list[str]] | None = None,
    ) -> None:
        self.__version__ = version
        self.cuda = cuda
        self.dla_cores = dla_cores
        self.events = cuda.events
        self.plugin_libraries = plugin_libraries or {}
        """Library path -> plugin creators it registers when opened."""
        self.registered_plugins: set[str] = set()
        self.engines: list[FakeEngine] = []
        self._specs: dict[int, FakeEngineSpec] = {}
        self._ids = itertools.count(1)

    def serialize(self, spec: FakeEngineSpec) -> bytes:
        """A plan file's bytes for ``spec`` (what the builder would have written)."""
        key = next(self._ids)
        self._specs[key] = spec
        return PLAN_MAGIC + json.dumps({"spec": key}).encode()

    def spec_of(self, plan: bytes) -> FakeEngineSpec | None:
        if not plan.startswith(PLAN_MAGIC):
            return None
        return self._specs.get(json.loads(plan[len(PLAN_MAGIC) :])["spec"])

    def Runtime(self, logger) -> FakeRuntime:
        return FakeRuntime(self, logger)

    def init_libnvinfer_plugins(self, logger, namespace: str) -> bool:
        self.cuda.record("init_libnvinfer_plugins", namespace)
        self.registered_plugins.add("BatchedNMS_TRT")
        return True

    def open_library(self, path: str) -> object:
        """Stands in for ``ctypes.CDLL(path, RTLD_GLOBAL)``."""
        self.cuda.record("open_library", path)
        if path not in self.plugin_libraries:
            raise OSError(f"{path}: cannot open shared object file: No such file or directory")
        self.registered_plugins.update(self.plugin_libraries[path])
        return object()

    def log(self, logger, severity: FakeSeverity, message: str) -> None:
        logger.log(severity, message)


class FakeRuntime:
    def __init__(self, trt: FakeTensorRTRuntime, logger) -> None:
        trt.cuda.require_context("Runtime")
        self._trt = trt
        self._logger = logger
        self.DLA_core = -1

    @property
    def num_DLA_cores(self) -> int:
        return self._trt.dla_cores

    def deserialize_cuda_engine(self, plan: bytes) -> FakeEngine | None:
        trt = self._trt
        trt.cuda.require_context("deserialize_cuda_engine")
        trt.cuda.record("deserialize", f"DLA_core={self.DLA_core}")
        error = FakeSeverity.ERROR
        spec = trt.spec_of(plan)
        if spec is None:
            self._logger.log(
                error,
                "1: [stdArchiveReader.cpp::StdArchiveReader::42] Error Code 1: Serialization "
                "(Serialization assertion stdVersionRead == serializationVersion failed.Version "
                "tag does not match. Note: Current Version: 236, Serialized Engine Version: 0)",
            )
            self._logger.log(
                error,
                "4: [runtime.cpp::deserializeCudaEngine::66] Error Code 4: Internal Error "
                "(Engine deserialization failed.)",
            )
            return None
        built_by = spec.tensorrt_version or trt.__version__
        if built_by != trt.__version__:
            self._logger.log(
                error,
                "6: The engine plan file is not compatible with this version of TensorRT, "
                f"expecting library version {trt.__version__} got {built_by}, please rebuild.",
            )
            return None
        here = ".".join(str(v) for v in trt.cuda.compute_capability)
        if spec.compute_capability != here:
            self._logger.log(
                error,
                "6: The engine plan file is generated on an incompatible device, expecting "
                f"compute {here} got compute {spec.compute_capability}, please rebuild.",
            )
            return None
        for plugin in spec.plugins:
            if plugin not in trt.registered_plugins:
                self._logger.log(error, f"3: getPluginCreator could not find plugin: {plugin}")
                return None
        engine = FakeEngine(trt, spec, self.DLA_core)
        trt.engines.append(engine)
        return engine


class FakeEngine:
    def __init__(self, trt: FakeTensorRTRuntime, spec: FakeEngineSpec, dla_core: int) -> None:
        self._trt = trt
        self.spec = spec
        self.dla_core = dla_core
        self._tensors = {t.name: t for t in [*spec.inputs, *spec.outputs]}
        self._inputs = {t.name for t in spec.inputs}
        self.contexts: list[FakeExecutionContext] = []

    @property
    def num_io_tensors(self) -> int:
        return len(self._tensors)

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.spec.profiles)

    def get_tensor_name(self, index: int) -> str:
        return list(self._tensors)[index]

    def get_tensor_mode(self, name: str):
        return FakeTensorIOMode.INPUT if name in self._inputs else FakeTensorIOMode.OUTPUT

    def get_tensor_shape(self, name: str) -> list[int]:
        return list(self._tensors[name].shape)

    def get_tensor_dtype(self, name: str):
        return FakeDataType[self._tensors[name].dtype]

    def get_tensor_location(self, name: str):
        return FakeTensorLocation[self._tensors[name].location]

    def get_tensor_format(self, name: str):
        return FakeTensorFormat[self._tensors[name].format]

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[list[int]]:
        low, best, high = self.spec.profiles[profile_index][name]
        return [list(low), list(best), list(high)]

    def create_execution_context(self) -> FakeExecutionContext:
        self._trt.cuda.require_context("create_execution_context")
        context = FakeExecutionContext(self._trt, self)
        self.contexts.append(context)
        return context

    def create_engine_inspector(self) -> FakeEngineInspector:
        return FakeEngineInspector(self)


class FakeEngineInspector:
    def __init__(self, engine: FakeEngine) -> None:
        self._engine = engine

    def get_engine_information(self, format) -> str:
        if format is not FakeLayerInformationFormat.JSON:
            raise ValueError("the fake inspector only speaks JSON")
        return json.dumps({"Layers": self._engine.spec.layers, "Bindings": []})


class FakeExecutionContext:
    def __init__(self, trt: FakeTensorRTRuntime, engine: FakeEngine) -> None:
        self._trt = trt
        self._engine = engine
        self.profile = 0
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self.executions: list[dict[str, Any]] = []

    def set_optimization_profile_async(self, index: int, stream_handle: int) -> bool:
        self._trt.cuda.require_context("set_optimization_profile_async")
        self._trt.cuda.record("set_profile", index)
        if not 0 <= index < len(self._engine.spec.profiles):
            return False
        self.profile = index
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        tensor = self._engine._tensors[name]
        ranges = self._engine.spec.profiles[self.profile].get(name)
        if ranges is None:
            ok = tuple(shape) == tensor.shape
        else:
            low, _, high = ranges
            ok = len(shape) == len(low) and all(
                lo <= s <= hi for s, lo, hi in zip(shape, low, high, strict=True)
            )
        if ok:
            self.input_shapes[name] = tuple(shape)
        return ok

    def get_tensor_shape(self, name: str) -> list[int]:
        tensor = self._engine._tensors[name]
        if name in self._engine._inputs:
            return list(self.input_shapes.get(name, tensor.shape))
        first = next(iter(self.input_shapes.values()), ())
        return [
            (first[i] if i < len(first) else -1) if d == -1 else d
            for i, d in enumerate(tensor.shape)
        ]

    def set_tensor_address(self, name: str, address: int) -> bool:
        self._trt.cuda.require_context("set_tensor_address")
        self.addresses[name] = address
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        cuda = self._trt.cuda
        cuda.require_context("execute_async_v3")
        spec = self._engine.spec
        missing = [name for name in self._engine._tensors if name not in self.addresses]
        if missing:
            raise FakeCudaError(f"execute_async_v3: no address for {missing}")
        feeds = {}
        for tensor in spec.inputs:
            shape = self.input_shapes[tensor.name]
            dtype = np.dtype(_NUMPY_BY_TYPE[tensor.dtype])
            nbytes = math.prod(shape) * dtype.itemsize
            raw = bytes(cuda.memory[self.addresses[tensor.name]][:nbytes])
            feeds[tensor.name] = np.frombuffer(raw, dtype=dtype).reshape(shape)
        results = spec.compute(feeds, spec.outputs)
        for tensor in spec.outputs:
            array = np.ascontiguousarray(results[tensor.name])
            expected = tuple(self.get_tensor_shape(tensor.name))
            if array.shape != expected:
                raise FakeCudaError(f"fake compute gave {array.shape}, engine says {expected}")
            target = cuda.memory[self.addresses[tensor.name]]
            if array.nbytes > len(target):
                raise FakeCudaError(f"output '{tensor.name}' buffer too small")
            target[: array.nbytes] = array.tobytes()
        self.executions.append({"profile": self.profile, "shapes": dict(self.input_shapes)})
        cuda.record("execute", self.profile)
        return True


def fake_runtimes(trt: FakeTensorRTRuntime) -> Callable[[], Runtimes]:
    """What ``Backend(runtimes=...)`` takes: the fakes instead of the imports."""
    return lambda: Runtimes(trt, trt.cuda, trt.open_library)
