"""The profile and batch size that follow from a network's I/O and the shape
flags: checked against the network, defaulted as trtexec does, and turned
into Triton's max_batch_size."""

from __future__ import annotations

import pytest

from edgebox.engine_build.network_io import (
    NetworkIO,
    Profile,
    TensorSpec,
    calibration_shapes,
    max_batch_size,
    resolve_profile,
)
from edgebox.engine_build.options import ShapeRange
from edgebox.errors import InvalidArgument

LANE = NetworkIO(
    inputs=(TensorSpec("input", "FP32", (-1, 3, 360, 640)),),
    outputs=(TensorSpec("predict_lanes", "FP32", (-1, 2784, 77)),),
)
STATIC = NetworkIO(
    inputs=(TensorSpec("input", "FP32", (1, 3, 360, 640)),),
    outputs=(TensorSpec("predict_lanes", "FP32", (1, 2784, 77)),),
)


def lane_range(low: int, opt: int, high: int) -> ShapeRange:
    return ShapeRange("input", (low, 3, 360, 640), (opt, 3, 360, 640), (high, 3, 360, 640))


def test_given_ranges_become_the_profile() -> None:
    profile = resolve_profile(LANE, (lane_range(1, 4, 8),), "'lane.onnx'")
    assert profile == Profile((lane_range(1, 4, 8),))


def test_a_dynamic_input_without_shapes_is_built_for_one_as_trtexec_does() -> None:
    profile = resolve_profile(LANE, (), "'lane.onnx'")
    assert profile.ranges == (lane_range(1, 1, 1),)
    assert profile.notes == (
        "input 'input' has dynamic dimensions [-1, 3, 360, 640] and no shapes were given; "
        "building for 1x3x360x640 as trtexec does (--min-shapes/--opt-shapes/--max-shapes set "
        "a range)",
    )


def test_a_static_network_needs_no_profile() -> None:
    assert resolve_profile(STATIC, (), "'lane.onnx'") == Profile()
    assert resolve_profile(STATIC, (lane_range(1, 1, 1),), "'lane.onnx'") == Profile()


def test_an_unknown_input_name_is_refused_listing_the_inputs() -> None:
    wrong = ShapeRange("images", (1, 3), (1, 3), (1, 3))
    with pytest.raises(InvalidArgument) as info:
        resolve_profile(LANE, (wrong,), "'lane.onnx'")
    assert str(info.value) == (
        "shape flags name input 'images', which 'lane.onnx' does not have; its inputs: 'input'"
    )


@pytest.mark.parametrize(
    ("shape_range", "message"),
    [
        (
            ShapeRange("input", (1, 3, 360, 640), (1, 3, 360, 640), (1, 3, 720, 1280)),
            "input 'input': max shape 1x3x720x1280 does not fit its shape in 'lane.onnx', "
            "[-1, 3, 360, 640] (-1 = any size)",
        ),
        (
            ShapeRange("input", (1, 3, 360), (1, 3, 360), (1, 3, 360)),
            "input 'input': min shape 1x3x360 does not fit its shape in 'lane.onnx', "
            "[-1, 3, 360, 640] (-1 = any size)",
        ),
    ],
)
def test_shapes_that_contradict_the_network_are_refused(
    shape_range: ShapeRange, message: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        resolve_profile(LANE, (shape_range,), "'lane.onnx'")
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("shape_range", "expected"),
    [(lane_range(1, 4, 8), 8), (lane_range(1, 1, 1), 1), (lane_range(2, 4, 8), 0)],
    ids=["range from 1", "fixed at 1", "range from 2"],
)
def test_max_batch_size_follows_the_profile(shape_range: ShapeRange, expected: int) -> None:
    assert max_batch_size(LANE, Profile((shape_range,))) == expected


def test_max_batch_size_takes_the_smallest_input_maximum() -> None:
    io = NetworkIO(
        inputs=(TensorSpec("a", "FP32", (-1, 2)), TensorSpec("b", "FP32", (-1, 3))),
        outputs=(TensorSpec("y", "FP32", (-1, 5)),),
    )
    profile = Profile(
        (ShapeRange("a", (1, 2), (4, 2), (16, 2)), ShapeRange("b", (1, 3), (4, 3), (8, 3)))
    )
    assert max_batch_size(io, profile) == 8


def test_an_output_without_an_open_first_dimension_means_no_batching() -> None:
    io = NetworkIO(inputs=LANE.inputs, outputs=(TensorSpec("count", "INT32", (1,)),))
    assert max_batch_size(io, Profile((lane_range(1, 4, 8),))) == 0


def test_a_static_network_does_not_batch() -> None:
    assert max_batch_size(STATIC, Profile()) == 0


def test_calibration_uses_the_opt_shape_or_the_static_shape() -> None:
    io = NetworkIO(
        inputs=(*LANE.inputs, TensorSpec("scale", "FP32", (2,))),
        outputs=LANE.outputs,
    )
    shapes = calibration_shapes(io, Profile((lane_range(1, 4, 8),)))
    assert shapes == {"input": (4, 3, 360, 640), "scale": (2,)}
