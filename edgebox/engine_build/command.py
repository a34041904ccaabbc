"""``edgebox build-engine``: check everything that can be checked cheaply,
build on the device, write the version's files, publish them as one version.

Order matters for the user's time: flags (``options.py``), then the
repository, the model's existing config and the ONNX file, then TensorRT and
the device, then the parse, the shapes and the first calibration batch, and
only then the build, which can take minutes. Nothing touches the repository
before ``publish_version``, which stages, flushes and renames (see
``repository/publish.py``): a poll-mode daemon loads the new version at first
sight, complete.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from edgebox import __version__
from edgebox.backends.tensorrt.compatibility import (
    SIDECAR_FILENAME,
    DeviceInfo,
    EngineBuildRecord,
    read_record,
)
from edgebox.backends.tensorrt.imports import import_pycuda_driver, import_tensorrt
from edgebox.engine_build.builder import BuildResult, EngineBuilder
from edgebox.engine_build.calibration import (
    CALIBRATION_CACHE_FILENAME,
    CalibrationFeed,
    entropy_calibrator,
)
from edgebox.engine_build.config_writer import (
    config_mismatches,
    engine_model_config,
    model_config_text,
)
from edgebox.engine_build.device import device_context, read_device
from edgebox.engine_build.network_io import (
    NetworkIO,
    Profile,
    calibration_shapes,
    max_batch_size,
    resolve_profile,
)
from edgebox.engine_build.options import BuildOptions, format_shape
from edgebox.engine_build.preprocessing import (
    ImageReader,
    PreprocessingRunner,
    calibration_samples,
    find_preprocessing,
    list_images,
    opencv_reader,
)
from edgebox.engine_build.sidecar import file_sha256, utc_timestamp
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, NotFound
from edgebox.repository.config import (
    CONFIG_FILENAME,
    DEFAULT_MODEL_FILENAMES,
    ModelConfig,
    parse_model_config_file,
)
from edgebox.repository.layout import scan_model
from edgebox.repository.publish import publish_version

Report = Callable[[str], None]


@dataclass(frozen=True)
class _Built:
    """What the device produced, once the CUDA context is closed again."""

    io: NetworkIO
    max_batch_size: int
    result: BuildResult
    tensorrt_version: str
    calibration_cache: bytes | None
    calibration_batches: int


def build_engine(
    options: BuildOptions,
    *,
    tensorrt: ModuleType | Any | None = None,
    cuda: ModuleType | Any | None = None,
    read_image: ImageReader | None = None,
    report: Report = print,
    now: Callable[[], datetime] | None = None,
) -> Path:
    """Build, write and publish; return the published version folder.

    ``tensorrt`` and ``cuda`` default to the real modules (Unavailable with
    an install hint when absent); tests hand in fakes. ``report`` receives
    the progress lines a user sees. Raises EdgeboxError with the reason; the
    repository is then unchanged.
    """
    existing = _check_repository(options)
    images = list_images(options.calibration_dir) if options.calibration_dir is not None else []
    if tensorrt is None:
        tensorrt = import_tensorrt()
    if cuda is None:
        cuda = import_pycuda_driver()
    device = read_device(cuda)
    onnx_sha256 = file_sha256(options.onnx_path)

    built = _build_on_device(
        options, existing, tensorrt, cuda, device, onnx_sha256, images, read_image, report
    )
    record = EngineBuildRecord(
        tensorrt_version=built.tensorrt_version,
        device_name=device.name,
        compute_capability=device.compute_capability,
        dla_core=options.dla_core,
        gpu_fallback=options.gpu_fallback,
        precision=options.precision,
        onnx_sha256=onnx_sha256,
        built_at=utc_timestamp(now() if now is not None else datetime.now(timezone.utc)),
        edgebox_version=__version__,
    )
    published = _publish(options, existing, built, record)

    for line in built.result.placement.lines():
        report(line)
    if built.calibration_batches:
        report(f"calibrated with {built.calibration_batches} batch(es)")
    if existing is None:
        report(
            f"wrote {CONFIG_FILENAME} for model '{options.model}' "
            f"(platform tensorrt_plan, max_batch_size {built.max_batch_size})"
        )
    return published


def _build_on_device(
    options: BuildOptions,
    existing: ModelConfig | None,
    tensorrt: Any,
    cuda: Any,
    device: DeviceInfo,
    onnx_sha256: str,
    images: list[Path],
    read_image: ImageReader | None,
    report: Report,
) -> _Built:
    """Everything that needs TensorRT, inside the device's CUDA context; the
    preprocessing model (for INT8) stays loaded until the build is done."""
    with ExitStack() as stack:
        stack.enter_context(device_context(cuda))
        builder = EngineBuilder(tensorrt)
        builder.check_dla_core(options.dla_core)
        io = builder.parse(options.onnx_path)
        profile = resolve_profile(io, options.shapes, f"'{options.onnx_path.name}'")
        batch = max_batch_size(io, profile)
        if existing is not None:
            _check_existing_config(options, existing, io, batch)
        report(_summary(options, builder.tensorrt_version, device))
        for note in profile.notes:
            report(f"note: {note}")
        for shape_range in profile.ranges:
            report(
                f"input '{shape_range.name}': min {format_shape(shape_range.min)}, "
                f"opt {format_shape(shape_range.opt)}, max {format_shape(shape_range.max)}"
            )
        feed = None
        if options.int8:
            feed = _calibration_feed(
                options,
                io,
                profile,
                cuda,
                stack,
                images=images,
                read_image=read_image,
                cache_key=(onnx_sha256, builder.tensorrt_version),
                report=report,
            )
        try:
            calibrator = entropy_calibrator(tensorrt, feed) if feed is not None else None
            result = builder.build(options, profile, calibrator)
        except EdgeboxError:
            # A failed calibration usually fails the build too; its own error says why.
            if feed is not None and feed.failure is not None:
                raise feed.failure from None
            raise
        finally:
            if feed is not None:
                feed.close()
        if feed is not None and feed.failure is not None:
            raise feed.failure
        cache = None
        if feed is not None:
            cache = feed.cache_out if feed.cache_out is not None else feed.read_cache()
        return _Built(
            io=io,
            max_batch_size=batch,
            result=result,
            tensorrt_version=builder.tensorrt_version,
            calibration_cache=cache,
            calibration_batches=feed.batches_fed if feed is not None else 0,
        )


def _publish(
    options: BuildOptions, existing: ModelConfig | None, built: _Built, record: EngineBuildRecord
) -> Path:
    """Lay the version out in a scratch folder and hand it to ``publish_version``,
    with a generated config.pbtxt when the model has none."""
    plan_name = (
        existing.default_model_filename
        if existing is not None and existing.default_model_filename
        else DEFAULT_MODEL_FILENAMES["tensorrt_plan"]
    )
    with tempfile.TemporaryDirectory(prefix="edgebox-build-engine-") as scratch:
        version_dir = Path(scratch) / "version"
        version_dir.mkdir()
        (version_dir / plan_name).write_bytes(built.result.plan)
        (version_dir / SIDECAR_FILENAME).write_text(record.to_json(), encoding="utf-8")
        if built.calibration_cache is not None:
            (version_dir / CALIBRATION_CACHE_FILENAME).write_bytes(built.calibration_cache)
        config_path = None
        if existing is None:
            config_path = Path(scratch) / CONFIG_FILENAME
            config = engine_model_config(
                options.model, built.io, built.max_batch_size, options.dla_core
            )
            config_path.write_text(
                model_config_text(config, f"'{options.onnx_path.name}'"), encoding="utf-8"
            )
        return publish_version(
            version_dir,
            options.repository,
            options.model,
            version=options.version,
            config=config_path,
        )


def _check_repository(options: BuildOptions) -> ModelConfig | None:
    """The model's current config (None when it has none yet); raises for a
    repository, model folder, version or ONNX file that cannot work."""
    repository = options.repository
    if not repository.is_dir():
        problem = NotFound if not repository.exists() else InvalidArgument
        raise problem(f"repository '{repository}' is not a folder")
    if not options.onnx_path.is_file():
        raise NotFound(f"ONNX file '{options.onnx_path}' does not exist")
    model_dir = repository / options.model
    if model_dir.exists() and not model_dir.is_dir():
        raise InvalidArgument(f"model '{options.model}': '{model_dir}' is not a folder")
    if options.version is not None and (model_dir / str(options.version)).exists():
        raise EdgeboxError(
            f"model '{options.model}' version {options.version}: "
            f"'{model_dir / str(options.version)}' already exists; versions are never "
            "overwritten, leave out --version to publish the next number",
            ErrorCode.ALREADY_EXISTS,
        )
    config_path = model_dir / CONFIG_FILENAME
    if not config_path.is_file():
        return None
    config, problems = parse_model_config_file(config_path, options.model)
    if problems:
        raise problems[0]
    return config


def _check_existing_config(
    options: BuildOptions, config: ModelConfig, io: NetworkIO, batch: int
) -> None:
    problems = config_mismatches(config, io, batch, options.dla_core)
    if problems:
        config_path = options.repository / options.model / CONFIG_FILENAME
        raise InvalidArgument(
            f"model '{options.model}': '{config_path}' does not fit the engine: "
            + "; ".join(problems)
        )


def _calibration_feed(
    options: BuildOptions,
    io: NetworkIO,
    profile: Profile,
    cuda: Any,
    stack: ExitStack,
    *,
    images: list[Path],
    read_image: ImageReader | None,
    cache_key: tuple[str, str],
    report: Report,
) -> CalibrationFeed:
    """A feed reading an earlier version's cache when one was calibrated with
    the same ``cache_key`` (ONNX sha256, TensorRT version), else one running
    the images through the preprocessing model (loaded until ``stack`` closes)."""
    shapes = calibration_shapes(io, profile)
    datatypes = {spec.name: spec.datatype for spec in io.inputs}
    if not options.recalibrate:
        earlier = _earlier_cache(options.repository / options.model, *cache_key)
        if earlier is not None:
            number, cache = earlier
            report(
                f"calibration: reusing the cache of version {number} (same ONNX file and "
                "TensorRT version); pass --recalibrate to calibrate from the images again"
            )
            return CalibrationFeed(
                cuda, None, shapes, datatypes, cache=cache, cache_source=f"version {number}"
            )
    plan = find_preprocessing(
        options.repository,
        options.model,
        [spec.name for spec in io.inputs],
        override=options.preprocess_model,
    )
    runner = stack.enter_context(PreprocessingRunner(plan))
    samples = calibration_samples(images, runner, read_image or opencv_reader())
    feed = CalibrationFeed(cuda, samples, shapes, datatypes)
    feed.prime()
    per_batch = feed.samples_per_batch or 1
    left_over = len(images) % per_batch
    report(
        f"calibration: {len(images)} image(s) from '{options.calibration_dir}' through model "
        f"'{plan.model}' (from {plan.found_in}), {len(images) // per_batch} batch(es) of "
        f"{per_batch}" + (f", {left_over} left over" if left_over else "")
    )
    return feed


def _earlier_cache(
    model_dir: Path, onnx_sha256: str, tensorrt_version: str
) -> tuple[int, bytes] | None:
    if not model_dir.is_dir():
        return None
    versions = scan_model(model_dir, fingerprints=False).versions
    for number in sorted(versions, reverse=True):
        folder = versions[number].path
        record = read_record(folder)
        if (
            record is None
            or record.precision != "int8"
            or record.onnx_sha256 != onnx_sha256
            or record.tensorrt_version != tensorrt_version
        ):
            continue
        try:
            return number, (folder / CALIBRATION_CACHE_FILENAME).read_bytes()
        except OSError:
            continue
    return None


def _summary(options: BuildOptions, tensorrt_version: str, device: DeviceInfo) -> str:
    precision = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8"}[options.precision]
    if options.int8 and options.fp16:
        precision = "INT8 and FP16"
    target = "GPU"
    if options.dla_core is not None:
        fallback = "with" if options.gpu_fallback else "without"
        target = f"DLA core {options.dla_core} {fallback} GPU fallback"
    return (
        f"building '{options.onnx_path}' for model '{options.model}' with TensorRT "
        f"{tensorrt_version} on {device.name} (compute {device.compute_capability}): "
        f"{precision}, {target}"
    )
