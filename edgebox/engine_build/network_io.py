"""A parsed network's inputs and outputs, and the optimization profile and
batch size that follow from them and the shape flags.

Plain data: ``builder.py`` fills ``NetworkIO`` from TensorRT's network, and
the rest of the build (profile, calibration shapes, ``config.pbtxt``) reads
only this, so those rules are tested without TensorRT.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.engine_build.options import Shape, ShapeRange, format_shape
from edgebox.errors import InvalidArgument


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    """KServe v2 name (``FP32``), as edgebox and tritonclient spell datatypes."""
    shape: Shape
    """Batch dimension included; -1 where the ONNX file leaves a dimension open."""

    @property
    def dynamic(self) -> bool:
        return -1 in self.shape


@dataclass(frozen=True)
class NetworkIO:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def input(self, name: str) -> TensorSpec | None:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        return None


@dataclass(frozen=True)
class Profile:
    """The optimization profile the engine is built with: a range for every
    dynamic input (static inputs need none)."""

    ranges: tuple[ShapeRange, ...] = ()
    notes: tuple[str, ...] = ()
    """Defaults the user did not choose, to be shown before the build."""

    def range_of(self, name: str) -> ShapeRange | None:
        for shape_range in self.ranges:
            if shape_range.name == name:
                return shape_range
        return None


def resolve_profile(io: NetworkIO, given: tuple[ShapeRange, ...], source: str) -> Profile:
    """The shape flags checked against the network: names must be inputs,
    ranks must match, fixed dimensions must keep their size. A dynamic input
    the flags leave out is built for 1 in each open dimension, as trtexec does,
    and a note says so. ``source`` names the ONNX file in messages."""
    for shape_range in given:
        spec = io.input(shape_range.name)
        if spec is None:
            known = ", ".join(f"'{i.name}'" for i in io.inputs) or "none"
            raise InvalidArgument(
                f"shape flags name input '{shape_range.name}', which {source} does not have; "
                f"its inputs: {known}"
            )
        labelled = (("min", shape_range.min), ("opt", shape_range.opt), ("max", shape_range.max))
        for label, shape in labelled:
            if not _fits(spec.shape, shape):
                raise InvalidArgument(
                    f"input '{spec.name}': {label} shape {format_shape(shape)} does not fit "
                    f"its shape in {source}, {_show(spec.shape)} (-1 = any size)"
                )
    ranges, notes = [], []
    by_name = {shape_range.name: shape_range for shape_range in given}
    for spec in io.inputs:
        if not spec.dynamic:
            continue
        shape_range = by_name.get(spec.name)
        if shape_range is None:
            shape = tuple(1 if d == -1 else d for d in spec.shape)
            shape_range = ShapeRange(spec.name, shape, shape, shape)
            notes.append(
                f"input '{spec.name}' has dynamic dimensions {_show(spec.shape)} and no shapes "
                f"were given; building for {format_shape(shape)} as trtexec does "
                "(--min-shapes/--opt-shapes/--max-shapes set a range)"
            )
        ranges.append(shape_range)
    return Profile(tuple(ranges), tuple(notes))


def calibration_shapes(io: NetworkIO, profile: Profile) -> dict[str, Shape]:
    """The shape of each input in one calibration batch: the profile's opt
    shape (TensorRT calibrates at the calibration profile's opt shape), or the
    static shape."""
    shapes = {}
    for spec in io.inputs:
        shape_range = profile.range_of(spec.name)
        shapes[spec.name] = shape_range.opt if shape_range is not None else spec.shape
    return shapes


def max_batch_size(io: NetworkIO, profile: Profile) -> int:
    """Triton's batching convention for an engine: when every input and
    output has an open first dimension and the profile lets every input's
    batch start at 1, the engine batches up to the smallest profile maximum;
    otherwise 0 (no batching: config dims are the full shapes)."""
    tensors = io.inputs + io.outputs
    if not tensors or any(not t.shape or t.shape[0] != -1 for t in tensors):
        return 0
    maxima = []
    for spec in io.inputs:
        shape_range = profile.range_of(spec.name)
        if shape_range is None or shape_range.min[0] != 1:
            return 0
        maxima.append(shape_range.max[0])
    return min(maxima)


def _fits(network_shape: Shape, shape: Shape) -> bool:
    return len(network_shape) == len(shape) and all(
        n in (-1, d) for n, d in zip(network_shape, shape, strict=True)
    )


def _show(shape: Shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
