"""An engine's inputs, outputs and profiles, read once through TensorRT's
named-tensor API (8.5+) into plain data.

Everything after this point (auto-complete, profile choice, the instance)
works on ``EngineIO`` and never asks the engine again, so it runs on any thread
and is tested without TensorRT. Reading happens on the thread that owns the
engine's CUDA context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from edgebox.backends.tensorrt.dtypes import config_type_of, tensorrt_type_name
from edgebox.backends.tensorrt.profiles import Profile, Shape, ShapeRange


@dataclass(frozen=True)
class EngineTensor:
    name: str
    is_input: bool
    config_type: str | None
    """``TYPE_*``; None for a TensorRT type Triton has no name for."""
    tensorrt_type: str
    shape: Shape
    """-1 for a dimension chosen at run time."""
    on_host: bool = False
    """A shape tensor, which TensorRT reads from host memory."""
    linear: bool = True
    """Plain row-major layout; DLA engines can be built with vectorized I/O formats."""
    format_name: str = "LINEAR"

    @property
    def dynamic(self) -> bool:
        return any(d < 0 for d in self.shape)


@dataclass(frozen=True)
class EngineIO:
    inputs: tuple[EngineTensor, ...]
    outputs: tuple[EngineTensor, ...]
    profiles: tuple[Profile, ...]

    def tensor(self, name: str) -> EngineTensor | None:
        for tensor in (*self.inputs, *self.outputs):
            if tensor.name == name:
                return tensor
        return None

    def problems(self) -> list[str]:
        """Why edgebox cannot feed this engine, if it cannot."""
        found = []
        for tensor in (*self.inputs, *self.outputs):
            kind = "input" if tensor.is_input else "output"
            if tensor.config_type is None:
                found.append(
                    f"{kind} '{tensor.name}' has TensorRT type {tensor.tensorrt_type}, "
                    "which has no Triton datatype"
                )
            if tensor.on_host:
                found.append(f"{kind} '{tensor.name}' is a shape tensor, which edgebox cannot feed")
            if not tensor.linear:
                found.append(
                    f"{kind} '{tensor.name}' uses the {tensor.format_name} I/O format; edgebox "
                    "passes row-major (LINEAR) tensors, so rebuild without custom I/O formats"
                )
        return found


def describe_engine(trt, engine) -> EngineIO:
    """Read ``engine`` through the 8.5+ named-tensor API; call on the thread that
    owns its CUDA context."""
    inputs: list[EngineTensor] = []
    outputs: list[EngineTensor] = []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        dtype = engine.get_tensor_dtype(name)
        tensor_format = engine.get_tensor_format(name)
        tensor = EngineTensor(
            name=name,
            is_input=engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT,
            config_type=config_type_of(dtype),
            tensorrt_type=tensorrt_type_name(dtype),
            shape=dims(engine.get_tensor_shape(name)),
            on_host=engine.get_tensor_location(name) == trt.TensorLocation.HOST,
            linear=tensor_format == trt.TensorFormat.LINEAR,
            format_name=tensorrt_type_name(tensor_format),
        )
        (inputs if tensor.is_input else outputs).append(tensor)
    profiles = []
    for profile_index in range(max(engine.num_optimization_profiles, 1)):
        ranges: dict[str, ShapeRange] = {}
        for tensor in inputs:
            if tensor.dynamic and not tensor.on_host:
                low, best, high = engine.get_tensor_profile_shape(tensor.name, profile_index)
                ranges[tensor.name] = ShapeRange(dims(low), dims(best), dims(high))
            else:
                ranges[tensor.name] = ShapeRange(tensor.shape, tensor.shape, tensor.shape)
        profiles.append(Profile(profile_index, ranges))
    return EngineIO(tuple(inputs), tuple(outputs), tuple(profiles))


def dims(value: Sequence[int]) -> Shape:
    """A ``trt.Dims`` (or any sequence of ints) as a tuple."""
    return tuple(int(value[i]) for i in range(len(value)))
