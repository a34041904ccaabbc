"""The TensorRT side of a build: parse the ONNX file, configure precision,
DLA and the optimization profile, and serialize the engine.

The ``tensorrt`` module is a constructor argument (``imports.import_tensorrt()``
on the device, a fake in tests). Only the TensorRT 8.5+ API that still exists
in 10.x is used: ``create_network`` with EXPLICIT_BATCH only before 10 (where
networks are always explicit-batch and the flag is deprecated),
``set_memory_pool_limit``, ``build_serialized_network``.
TensorRT objects never leave this module: callers get ``NetworkIO``, a
``PlacementReport`` and bytes.
Reference: https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/dla-build-and-run.html
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from edgebox.engine_build.network_io import NetworkIO, Profile, TensorSpec
from edgebox.engine_build.options import BuildOptions
from edgebox.engine_build.placement import (
    DLA,
    GPU,
    LayerPlacement,
    PlacementReport,
    builder_placement_lines,
)
from edgebox.errors import EdgeboxError, InvalidArgument, Unsupported

_log = logging.getLogger("edgebox.engine_build.tensorrt")

_DATATYPES = {
    "FLOAT": "FP32",
    "HALF": "FP16",
    "BF16": "BF16",
    "INT8": "INT8",
    "UINT8": "UINT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "BOOL": "BOOL",
}
"""TensorRT DataType member -> KServe datatype, for network inputs and outputs."""

_LOG_LEVELS = {
    "INTERNAL_ERROR": logging.ERROR,
    "ERROR": logging.ERROR,
    "WARNING": logging.WARNING,
    "INFO": logging.DEBUG,
    "VERBOSE": logging.DEBUG,
}

_MAX_LISTED_LAYERS = 10


@dataclass(frozen=True)
class BuildResult:
    plan: bytes
    placement: PlacementReport


class EngineBuilder:
    """One build. The builder, network, parser and logger live as long as this
    object: the network refers to weights the parser owns, and TensorRT calls
    the logger until the engine is serialized. Use from one thread."""

    def __init__(self, tensorrt: ModuleType | Any) -> None:
        self._trt = tensorrt
        self._logger = _capturing_logger(tensorrt)
        # Registers TensorRT's bundled plugins (NMS, ...) that ONNX files may use, as trtexec does.
        init_plugins = getattr(tensorrt, "init_libnvinfer_plugins", None)
        if init_plugins is not None:
            init_plugins(self._logger, "")
        self._builder = tensorrt.Builder(self._logger)
        self._network: Any = None
        self._parser: Any = None

    @property
    def tensorrt_version(self) -> str:
        return str(self._trt.__version__)

    @property
    def dla_cores(self) -> int:
        """The DLA cores this builder can build for (``IBuilder.num_DLA_cores``):
        0 off a Jetson and on Orin Nano, 2 on AGX Orin and Orin NX."""
        return int(self._builder.num_DLA_cores)

    def check_dla_core(self, dla_core: int | None) -> None:
        """Before parsing: a core the device lacks fails fast. Orin Nano has
        none; AGX Orin and Orin NX have two."""
        if dla_core is None:
            return
        cores = self.dla_cores
        if cores == 0:
            raise Unsupported(
                f"--dla-core {dla_core}: this device has no DLA cores (Orin Nano has none; "
                "AGX Orin and Orin NX have two); build without --dla-core"
            )
        if dla_core >= cores:
            raise InvalidArgument(
                f"--dla-core {dla_core}: this device has {cores} DLA cores (0 to {cores - 1})"
            )

    def parse(self, onnx_path: Path) -> NetworkIO:
        """Raise InvalidArgument listing every error TensorRT's ONNX parser reports."""
        self._network = self._builder.create_network(self._network_flags())
        self._parser = self._trt.OnnxParser(self._network, self._logger)
        if not self._parser.parse_from_file(str(onnx_path)):
            errors = [
                _parser_error(self._parser.get_error(i)) for i in range(self._parser.num_errors)
            ]
            if not errors:
                errors = self._logger.errors() or ["(no error was reported)"]
            listed = "\n".join(f"  {error}" for error in errors)
            raise InvalidArgument(f"'{onnx_path}': TensorRT's ONNX parser failed:\n{listed}")
        network = self._network
        return NetworkIO(
            inputs=tuple(_tensor_spec(network.get_input(i)) for i in range(network.num_inputs)),
            outputs=tuple(_tensor_spec(network.get_output(i)) for i in range(network.num_outputs)),
        )

    def build(
        self,
        options: BuildOptions,
        profile: Profile,
        calibrator: Any = None,
    ) -> BuildResult:
        """Serialize the engine; ``calibrator`` is required for INT8. Raise
        Unsupported when DLA layers cannot run there without --gpu-fallback,
        EdgeboxError with TensorRT's errors when the build fails."""
        assert self._network is not None, "parse() first"
        trt = self._trt
        config = self._builder.create_builder_config()
        if options.workspace_mb is not None:
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
        if options.fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        if profile.ranges:
            config.add_optimization_profile(self._profile(profile, calibration=False))
        if options.int8:
            assert calibrator is not None, "INT8 needs a calibrator"
            config.set_flag(trt.BuilderFlag.INT8)
            config.int8_calibrator = calibrator
            if profile.ranges:
                config.set_calibration_profile(self._profile(profile, calibration=True))
        if options.dla_core is not None:
            config.default_device_type = trt.DeviceType.DLA
            config.DLA_core = options.dla_core
            if options.gpu_fallback:
                config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
        layers = self._placements(config, options.dla_core is not None)
        if options.dla_core is not None and not options.gpu_fallback:
            _refuse_gpu_layers(layers, options.dla_core)

        serialized = self._builder.build_serialized_network(self._network, config)
        if serialized is None:
            errors = self._logger.errors()
            detail = "\n".join(f"  {e}" for e in errors) if errors else "  (no error was logged)"
            raise EdgeboxError(f"TensorRT could not build the engine:\n{detail}")
        placement = PlacementReport(
            dla_core=options.dla_core,
            gpu_fallback=options.gpu_fallback,
            layers=layers,
            builder_lines=builder_placement_lines(self._logger.messages()),
        )
        return BuildResult(plan=bytes(serialized), placement=placement)

    def _network_flags(self) -> int:
        major = int(str(self._trt.__version__).split(".")[0])
        explicit = getattr(self._trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
        if major < 10 and explicit is not None:
            return 1 << int(explicit)
        return 0

    def _profile(self, profile: Profile, calibration: bool) -> Any:
        """The build profile, or for calibration one fixed at the opt shapes:
        calibration batches have exactly that shape."""
        optimization = self._builder.create_optimization_profile()
        for shape_range in profile.ranges:
            if calibration:
                shapes = (shape_range.opt, shape_range.opt, shape_range.opt)
            else:
                shapes = (shape_range.min, shape_range.opt, shape_range.max)
            optimization.set_shape(shape_range.name, *shapes)
        return optimization

    def _placements(self, config: Any, dla: bool) -> tuple[LayerPlacement, ...]:
        placements = []
        for index in range(self._network.num_layers):
            layer = self._network.get_layer(index)
            on_dla = dla and bool(config.can_run_on_DLA(layer))
            placements.append(
                LayerPlacement(layer.name, enum_name(layer.type), DLA if on_dla else GPU)
            )
        return tuple(placements)


def enum_name(value: Any) -> str:
    """A TensorRT enum member's name (``DataType.FLOAT`` -> ``FLOAT``)."""
    name = getattr(value, "name", None)
    return str(name) if name is not None else str(value).rsplit(".", 1)[-1]


def _refuse_gpu_layers(layers: tuple[LayerPlacement, ...], dla_core: int) -> None:
    """Without GPU fallback TensorRT fails the build on the first such layer;
    listing them all up front is more useful."""
    stuck = [layer for layer in layers if layer.device == GPU]
    if not stuck:
        return
    shown = ", ".join(f"'{layer.name}' ({layer.kind})" for layer in stuck[:_MAX_LISTED_LAYERS])
    more = f" and {len(stuck) - _MAX_LISTED_LAYERS} more" if len(stuck) > _MAX_LISTED_LAYERS else ""
    raise Unsupported(
        f"--dla-core {dla_core}: {len(stuck)} of {len(layers)} layers cannot run on the DLA: "
        f"{shown}{more}; add --gpu-fallback to run them on the GPU"
    )


def _tensor_spec(tensor: Any) -> TensorSpec:
    dtype = enum_name(tensor.dtype)
    datatype = _DATATYPES.get(dtype)
    if datatype is None:
        raise Unsupported(f"tensor '{tensor.name}': TensorRT datatype {dtype} has no KServe type")
    return TensorSpec(tensor.name, datatype, tuple(int(d) for d in tensor.shape))


def _parser_error(error: Any) -> str:
    """``node 3 'Resize_6' (Resize): <description>`` where TensorRT says which node."""
    description = str(error.desc())
    node = int(error.node()) if callable(getattr(error, "node", None)) else -1
    if node < 0:
        return description
    where = f"node {node}"
    name = error.node_name() if callable(getattr(error, "node_name", None)) else ""
    operator = error.node_operator() if callable(getattr(error, "node_operator", None)) else ""
    if name:
        where += f" '{name}'"
    if operator:
        where += f" ({operator})"
    return f"{where}: {description}"


def _capturing_logger(tensorrt: ModuleType | Any) -> Any:
    """A ``trt.ILogger`` that keeps the messages down to INFO (the placement
    lines and the errors behind a failed build are read back from it) and
    forwards all to Python logging: errors and warnings show, the rest only
    with debug on."""

    class CapturingLogger(tensorrt.ILogger):
        def __init__(self) -> None:
            tensorrt.ILogger.__init__(self)
            self._records: list[tuple[str, str]] = []

        def log(self, severity: Any, msg: str) -> None:
            level = enum_name(severity)
            if level != "VERBOSE":
                self._records.append((level, msg))
            _log.log(_LOG_LEVELS.get(level, logging.DEBUG), "TensorRT: %s", msg)

        def messages(self) -> list[str]:
            return [msg for _, msg in self._records]

        def errors(self) -> list[str]:
            return [msg for level, msg in self._records if level in ("ERROR", "INTERNAL_ERROR")]

    return CapturingLogger()
