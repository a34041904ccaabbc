"""The ``build-engine`` flags, checked into one frozen ``BuildOptions``.

Pure: nothing here reads the disk or imports TensorRT, so every flag rule is
checked (and tested) before a build that can take minutes starts. Rules that
need the network (input names, ranks) or the device (DLA core count) are
checked where those are known: ``network_io.py`` and ``builder.py``.

Shapes use trtexec's syntax, so a working trtexec command line carries over:
``input:1x3x360x640,other:1x4`` (a name holding ':' or ',' is written in single
quotes, ``'input:0':1x3``; a scalar is ``name:`` or ``name:scalar``). As in
trtexec, ``--opt-shapes`` alone means one fixed shape (min = opt = max), and
otherwise all three are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgebox.errors import InvalidArgument
from edgebox.repository.names import check_new_model_name, version_number

Shape = tuple[int, ...]

SHAPE_FLAGS = ("--min-shapes", "--opt-shapes", "--max-shapes")

_SHAPE_EXAMPLE = "write shapes as NAME:DxDxD, e.g. input:1x3x360x640"


@dataclass(frozen=True)
class ShapeRange:
    """One input's optimization-profile shapes, batch dimension included."""

    name: str
    min: Shape
    opt: Shape
    max: Shape

    @property
    def fixed(self) -> bool:
        return self.min == self.opt == self.max


@dataclass(frozen=True)
class BuildOptions:
    onnx_path: Path
    repository: Path
    model: str
    version: int | None = None
    """None: the highest version folder + 1, as ``edgebox publish`` counts."""
    fp16: bool = False
    int8: bool = False
    calibration_dir: Path | None = None
    preprocess_model: str | None = None
    """None: found in the repository's ensembles (the python model feeding ``model``)."""
    recalibrate: bool = False
    """Ignore the calibration cache of an earlier version built from the same ONNX."""
    dla_core: int | None = None
    gpu_fallback: bool = False
    shapes: tuple[ShapeRange, ...] = ()
    """Empty: dynamic dimensions default to 1, as in trtexec."""
    workspace_mb: int | None = None
    """None: TensorRT's default (the device's memory)."""

    @property
    def precision(self) -> str:
        """The sidecar's ``precision``: the lowest precision the build allows."""
        if self.int8:
            return "int8"
        if self.fp16:
            return "fp16"
        return "fp32"


def parse_build_options(
    onnx_path: Path,
    repository: Path,
    model: str,
    *,
    version: str | None = None,
    fp16: bool = False,
    int8: bool = False,
    calibration_dir: Path | None = None,
    preprocess_model: str | None = None,
    recalibrate: bool = False,
    dla_core: str | None = None,
    gpu_fallback: bool = False,
    min_shapes: str | None = None,
    opt_shapes: str | None = None,
    max_shapes: str | None = None,
    workspace_mb: str | None = None,
) -> BuildOptions:
    """Numbers arrive as the strings the user typed, so every bad value is
    reported in this module's words, naming the flag. Raises InvalidArgument
    for the first problem found."""
    check_new_model_name(model, "--model")
    if preprocess_model is not None:
        check_new_model_name(preprocess_model, "--preprocess-model")
    number = None
    if version is not None:
        number = version_number(version)
        if number is None:
            raise InvalidArgument(
                f"--version '{version}': a version folder is named with a positive integer "
                "without a leading zero"
            )
    core = _non_negative(dla_core, "--dla-core", "a DLA core number (0, 1, ...)")
    workspace = _non_negative(workspace_mb, "--workspace", "a size in MiB, e.g. 2048")
    if workspace == 0:
        raise InvalidArgument("--workspace '0': expected a size in MiB greater than 0")

    if core is not None and not (fp16 or int8):
        raise InvalidArgument(
            f"--dla-core {core}: DLA runs only FP16 and INT8 layers; add --fp16 or --int8 "
            f"(trtexec: --useDLACore={core} --fp16)"
        )
    if gpu_fallback and core is None:
        raise InvalidArgument("--gpu-fallback only applies with --dla-core N")
    if int8 and calibration_dir is None:
        raise InvalidArgument(
            "--int8 needs --calibration-dir DIR: a folder of images to calibrate with, "
            "fed through the model's preprocessing"
        )
    if not int8:
        for flag, given in (
            ("--calibration-dir", calibration_dir is not None),
            ("--preprocess-model", preprocess_model is not None),
            ("--recalibrate", recalibrate),
        ):
            if given:
                raise InvalidArgument(f"{flag} only applies with --int8")

    shapes = parse_shape_ranges(min_shapes, opt_shapes, max_shapes)
    if core is not None:
        for shape in shapes:
            if not shape.fixed:
                raise InvalidArgument(
                    f"--dla-core {core}: DLA needs one fixed shape per input, but input "
                    f"'{shape.name}' ranges from {format_shape(shape.min)} to "
                    f"{format_shape(shape.max)}; give only --opt-shapes (otherwise TensorRT "
                    "runs every DLA layer on the GPU)"
                )
    return BuildOptions(
        onnx_path=onnx_path,
        repository=repository,
        model=model,
        version=number,
        fp16=fp16,
        int8=int8,
        calibration_dir=calibration_dir,
        preprocess_model=preprocess_model,
        recalibrate=recalibrate,
        dla_core=core,
        gpu_fallback=gpu_fallback,
        shapes=shapes,
        workspace_mb=workspace,
    )


def parse_shape_ranges(
    min_spec: str | None, opt_spec: str | None, max_spec: str | None
) -> tuple[ShapeRange, ...]:
    """trtexec's rule: all three flags, or ``--opt-shapes`` alone for one fixed
    shape. Each input's three shapes must have one rank and min <= opt <= max
    in every dimension."""
    given = dict(zip(SHAPE_FLAGS, (min_spec, opt_spec, max_spec), strict=True))
    if all(spec is None for spec in given.values()):
        return ()
    if min_spec is None and max_spec is None:
        assert opt_spec is not None
        opt = parse_shapes_spec(opt_spec, "--opt-shapes")
        return tuple(ShapeRange(name, shape, shape, shape) for name, shape in opt.items())
    missing = [flag for flag, spec in given.items() if spec is None]
    if missing:
        raise InvalidArgument(
            f"give --min-shapes, --opt-shapes and --max-shapes together (missing: "
            f"{', '.join(missing)}), or only --opt-shapes for one fixed shape, as trtexec does"
        )
    parsed = {flag: parse_shapes_spec(spec, flag) for flag, spec in given.items() if spec}
    names = list(parsed["--opt-shapes"])
    for flag, shapes in parsed.items():
        for name in shapes:
            if name not in names:
                raise InvalidArgument(
                    f"input '{name}' is in {flag} but not in --opt-shapes; "
                    "give every input in all three"
                )
        for name in names:
            if name not in shapes:
                raise InvalidArgument(
                    f"input '{name}' is in --opt-shapes but not in {flag}; "
                    "give every input in all three"
                )
    ranges = []
    for name in names:
        low, opt, high = (parsed[flag][name] for flag in SHAPE_FLAGS)
        if not len(low) == len(opt) == len(high):
            raise InvalidArgument(
                f"input '{name}': min, opt and max shapes need the same number of dimensions, "
                f"got {format_shape(low)}, {format_shape(opt)} and {format_shape(high)}"
            )
        if any(not a <= b <= c for a, b, c in zip(low, opt, high, strict=True)):
            raise InvalidArgument(
                f"input '{name}': expected min <= opt <= max in every dimension, got "
                f"min {format_shape(low)}, opt {format_shape(opt)}, max {format_shape(high)}"
            )
        ranges.append(ShapeRange(name, low, opt, high))
    return tuple(ranges)


def parse_shapes_spec(spec: str, flag: str) -> dict[str, Shape]:
    """``input:1x3x360x640,'in:0':2`` -> {"input": (1, 3, 360, 640), "in:0": (2,)}."""
    shapes: dict[str, Shape] = {}
    for entry in _split_entries(spec, flag):
        name, dims_text = _split_name(entry, spec, flag)
        if name in shapes:
            raise InvalidArgument(f"{flag} '{spec}': input '{name}' is given twice")
        shapes[name] = _parse_dims(dims_text, name, spec, flag)
    return shapes


def format_shape(shape: Shape) -> str:
    """trtexec's spelling: ``1x3x360x640``; a scalar is ``scalar``."""
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _split_entries(spec: str, flag: str) -> list[str]:
    entries, current, quoted = [], [], False
    for char in spec:
        if char == "'":
            quoted = not quoted
        if char == "," and not quoted:
            entries.append("".join(current))
            current = []
        else:
            current.append(char)
    if quoted:
        raise InvalidArgument(f"{flag} '{spec}': a quoted input name is not closed with '")
    entries.append("".join(current))
    if any(not entry.strip() for entry in entries):
        raise InvalidArgument(f"{flag} '{spec}': empty entry; {_SHAPE_EXAMPLE}")
    return [entry.strip() for entry in entries]


def _split_name(entry: str, spec: str, flag: str) -> tuple[str, str]:
    if entry.startswith("'"):
        end = entry.find("'", 1)
        name, rest = entry[1:end], entry[end + 1 :]
        if not rest.startswith(":"):
            raise InvalidArgument(
                f"{flag} '{spec}': expected ':' after the quoted name '{name}'; {_SHAPE_EXAMPLE}"
            )
        return name, rest[1:]
    colon = entry.rfind(":")
    if colon <= 0:
        raise InvalidArgument(f"{flag} '{spec}': '{entry}' has no input name; {_SHAPE_EXAMPLE}")
    return entry[:colon], entry[colon + 1 :]


def _parse_dims(text: str, name: str, spec: str, flag: str) -> Shape:
    if text in ("", "scalar"):
        return ()
    dims = []
    for part in text.split("x"):
        if not (part.isascii() and part.isdigit()) or int(part) == 0:
            raise InvalidArgument(
                f"{flag} '{spec}': dimension '{part}' of input '{name}' is not a positive "
                f"integer; {_SHAPE_EXAMPLE}"
            )
        dims.append(int(part))
    return tuple(dims)


def _non_negative(text: str | None, flag: str, expected: str) -> int | None:
    if text is None:
        return None
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        raise InvalidArgument(f"{flag} '{text}': expected {expected}")
    return int(value)
