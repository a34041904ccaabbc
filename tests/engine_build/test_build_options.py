"""``parse_build_options``: trtexec's shape syntax and the flag rules, refused
with messages that name the flag, before anything is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.engine_build.options import (
    BuildOptions,
    ShapeRange,
    format_shape,
    parse_build_options,
    parse_shape_ranges,
    parse_shapes_spec,
)
from edgebox.errors import InvalidArgument

ONNX = Path("lane.onnx")
REPO = Path("repo")


def options(**flags) -> BuildOptions:
    return parse_build_options(ONNX, REPO, "lane_detector", **flags)


def refused(**flags) -> str:
    with pytest.raises(InvalidArgument) as info:
        options(**flags)
    return str(info.value)


# ------------------------------------------------------------------ shapes syntax


def test_shapes_spec_reads_trtexec_syntax() -> None:
    assert parse_shapes_spec("input:1x3x360x640,mask:1x360", "--opt-shapes") == {
        "input": (1, 3, 360, 640),
        "mask": (1, 360),
    }


def test_quoted_names_may_hold_colons_and_commas() -> None:
    assert parse_shapes_spec("'in:0':2x3,'a,b':4", "--opt-shapes") == {
        "in:0": (2, 3),
        "a,b": (4,),
    }


def test_an_unquoted_name_ends_at_the_last_colon() -> None:
    assert parse_shapes_spec("scope:input:1x2", "--opt-shapes") == {"scope:input": (1, 2)}


@pytest.mark.parametrize("spec", ["count:", "count:scalar"])
def test_scalars_are_written_as_trtexec_writes_them(spec: str) -> None:
    assert parse_shapes_spec(spec, "--opt-shapes") == {"count": ()}
    assert format_shape(()) == "scalar"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "input:1x3xAx640",
            "--opt-shapes 'input:1x3xAx640': dimension 'A' of input 'input' is not a positive "
            "integer; write shapes as NAME:DxDxD, e.g. input:1x3x360x640",
        ),
        (
            "input:0x3",
            "--opt-shapes 'input:0x3': dimension '0' of input 'input' is not a positive "
            "integer; write shapes as NAME:DxDxD, e.g. input:1x3x360x640",
        ),
        (
            "input:-1x3",
            "--opt-shapes 'input:-1x3': dimension '-1' of input 'input' is not a positive "
            "integer; write shapes as NAME:DxDxD, e.g. input:1x3x360x640",
        ),
        (
            "1x3x360x640",
            "--opt-shapes '1x3x360x640': '1x3x360x640' has no input name; "
            "write shapes as NAME:DxDxD, e.g. input:1x3x360x640",
        ),
        (
            "input:1x3,,mask:1",
            "--opt-shapes 'input:1x3,,mask:1': empty entry; "
            "write shapes as NAME:DxDxD, e.g. input:1x3x360x640",
        ),
        ("'input:1x3", "--opt-shapes ''input:1x3': a quoted input name is not closed with '"),
        ("input:1x3,input:2x3", "--opt-shapes 'input:1x3,input:2x3': input 'input' is given twice"),
    ],
)
def test_malformed_shapes_are_refused_naming_the_flag(spec: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_shapes_spec(spec, "--opt-shapes")
    assert str(info.value) == message


# ------------------------------------------------------------------ min / opt / max


def test_opt_shapes_alone_fix_the_shape_as_in_trtexec() -> None:
    assert parse_shape_ranges(None, "input:1x3x360x640", None) == (
        ShapeRange("input", (1, 3, 360, 640), (1, 3, 360, 640), (1, 3, 360, 640)),
    )


def test_no_shape_flags_give_no_ranges() -> None:
    assert parse_shape_ranges(None, None, None) == ()


def test_three_flags_give_a_range_per_input() -> None:
    ranges = parse_shape_ranges(
        "input:1x3x360x640,mask:1x1", "input:4x3x360x640,mask:4x1", "input:8x3x360x640,mask:8x1"
    )
    assert ranges == (
        ShapeRange("input", (1, 3, 360, 640), (4, 3, 360, 640), (8, 3, 360, 640)),
        ShapeRange("mask", (1, 1), (4, 1), (8, 1)),
    )
    assert not ranges[0].fixed


@pytest.mark.parametrize(
    ("low", "opt", "high", "message"),
    [
        (
            "input:1x3",
            None,
            "input:8x3",
            "give --min-shapes, --opt-shapes and --max-shapes together (missing: --opt-shapes), "
            "or only --opt-shapes for one fixed shape, as trtexec does",
        ),
        (
            None,
            "input:4x3",
            "input:8x3",
            "give --min-shapes, --opt-shapes and --max-shapes together (missing: --min-shapes), "
            "or only --opt-shapes for one fixed shape, as trtexec does",
        ),
        (
            "input:1x3",
            "input:4x3",
            "input:8x3,mask:1",
            "input 'mask' is in --max-shapes but not in --opt-shapes; give every input in all three",
        ),
        (
            "input:1x3",
            "input:4x3,mask:1",
            "input:8x3",
            "input 'mask' is in --opt-shapes but not in --min-shapes; give every input in all three",
        ),
        (
            "input:1x3",
            "input:4x3x1",
            "input:8x3",
            "input 'input': min, opt and max shapes need the same number of dimensions, "
            "got 1x3, 4x3x1 and 8x3",
        ),
        (
            "input:4x3",
            "input:2x3",
            "input:8x3",
            "input 'input': expected min <= opt <= max in every dimension, got min 4x3, "
            "opt 2x3, max 8x3",
        ),
    ],
)
def test_inconsistent_shape_flags_are_refused(
    low: str | None, opt: str | None, high: str | None, message: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_shape_ranges(low, opt, high)
    assert str(info.value) == message


# ------------------------------------------------------------------ flag rules


def test_defaults_build_fp32_for_the_gpu_at_the_next_version() -> None:
    built = options()
    assert built == BuildOptions(ONNX, REPO, "lane_detector")
    assert (built.precision, built.dla_core, built.version, built.shapes) == (
        "fp32",
        None,
        None,
        (),
    )


def test_numbers_arrive_as_typed_and_are_converted() -> None:
    built = options(fp16=True, dla_core="1", version="7", workspace_mb="2048")
    assert (built.dla_core, built.version, built.workspace_mb) == (1, 7, 2048)


@pytest.mark.parametrize(
    ("flags", "precision"),
    [({"fp16": True}, "fp16"), ({"int8": True}, "int8"), ({"int8": True, "fp16": True}, "int8")],
)
def test_precision_is_the_lowest_allowed(flags: dict, precision: str) -> None:
    if flags.get("int8"):
        flags["calibration_dir"] = Path("calib")
    assert options(**flags).precision == precision


def test_dla_without_fp16_or_int8_is_refused() -> None:
    assert refused(dla_core="0") == (
        "--dla-core 0: DLA runs only FP16 and INT8 layers; add --fp16 or --int8 "
        "(trtexec: --useDLACore=0 --fp16)"
    )


@pytest.mark.parametrize("flags", [{"fp16": True}, {"int8": True, "calibration_dir": Path("c")}])
def test_dla_with_fp16_or_int8_is_accepted(flags: dict) -> None:
    assert options(dla_core="0", gpu_fallback=True, **flags).dla_core == 0


def test_gpu_fallback_needs_a_dla_core() -> None:
    assert refused(fp16=True, gpu_fallback=True) == "--gpu-fallback only applies with --dla-core N"


def test_dla_with_a_shape_range_is_refused() -> None:
    message = refused(
        fp16=True,
        dla_core="0",
        min_shapes="input:1x3",
        opt_shapes="input:2x3",
        max_shapes="input:4x3",
    )
    assert message == (
        "--dla-core 0: DLA needs one fixed shape per input, but input 'input' ranges from 1x3 "
        "to 4x3; give only --opt-shapes (otherwise TensorRT runs every DLA layer on the GPU)"
    )


def test_int8_needs_a_calibration_folder() -> None:
    assert refused(int8=True) == (
        "--int8 needs --calibration-dir DIR: a folder of images to calibrate with, "
        "fed through the model's preprocessing"
    )


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        ({"calibration_dir": Path("calib")}, "--calibration-dir"),
        ({"preprocess_model": "pre"}, "--preprocess-model"),
        ({"recalibrate": True}, "--recalibrate"),
    ],
)
def test_calibration_flags_need_int8(flags: dict, flag: str) -> None:
    assert refused(fp16=True, **flags) == f"{flag} only applies with --int8"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dla_core": "one"}, "--dla-core 'one': expected a DLA core number (0, 1, ...)"),
        ({"dla_core": "-1"}, "--dla-core '-1': expected a DLA core number (0, 1, ...)"),
        ({"workspace_mb": "2G"}, "--workspace '2G': expected a size in MiB, e.g. 2048"),
        ({"workspace_mb": "0"}, "--workspace '0': expected a size in MiB greater than 0"),
        (
            {"version": "03"},
            "--version '03': a version folder is named with a positive integer without a "
            "leading zero",
        ),
    ],
)
def test_bad_numbers_are_refused_naming_the_flag(flags: dict, message: str) -> None:
    assert refused(fp16=True, **flags) == message


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("", "--model: model name is empty"),
        ("a/b", "--model 'a/b': a model name must not contain '/'"),
        (
            ".hidden",
            "--model '.hidden': names starting with '.' or ending with .tmp or .partial are "
            "ignored by the repository",
        ),
    ],
)
def test_a_model_name_the_repository_cannot_hold_is_refused(model: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_build_options(ONNX, REPO, model)
    assert str(info.value) == message
