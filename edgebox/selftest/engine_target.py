"""One engine of the engines section: the demo detector built for the GPU or
for one DLA core (FP16, GPU fallback allowed), its answer to the road frame
compared with ONNX Runtime's, then run for a fixed time while the board's
power is read. Three checks per target: ``<target> build``, ``<target>
output`` and ``<target> speed``; a target that fails to build or load has
only the first, one whose engine raises when run has no speed.

Everything that touches TensorRT or CUDA runs on a ``CudaWorker`` thread of
the target's own, the TensorRT backend's rule (``backends/tensorrt/``): the
build through engine_build's ``EngineBuilder``, the load through the
backend's ``open_engine``, every frame through its ``EngineExecution``, as
the daemon runs a ``tensorrt_plan`` model. Targets run one after another and
each closes its worker (its buffers freed there) before the next starts, so
one engine holds GPU memory at a time, and one TensorRT builder or runtime
exists at a time: TensorRT keeps a single logger per process, and the
builder's must be gone for the runtime's to catch why a load fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebox.backends.tensorrt.backend import Runtimes
from edgebox.backends.tensorrt.compatibility import DeviceInfo
from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.backends.tensorrt.engine_loader import DlaChoice, open_engine
from edgebox.backends.tensorrt.execution import EngineExecution
from edgebox.backends.tensorrt.placement import Placement
from edgebox.backends.tensorrt.plugins import load_plugins
from edgebox.backends.tensorrt.trt_logger import tensorrt_logger
from edgebox.engine_build.builder import BuildResult, EngineBuilder
from edgebox.engine_build.device import DEVICE_ID
from edgebox.engine_build.network_io import resolve_profile
from edgebox.engine_build.options import BuildOptions, format_shape, parse_build_options
from edgebox.errors import EdgeboxError, one_line
from edgebox.selftest.agreement import Agreement, agreement, shape_problem
from edgebox.selftest.detector_case import DETECTOR, DetectorCase
from edgebox.selftest.engine_placement import placement_line
from edgebox.selftest.loaded_model import Arrays
from edgebox.selftest.report import Check, Status
from edgebox.selftest.timed_run import PowerReader, RunFigures, run_for

SECTION = "engines"


@dataclass(frozen=True)
class Target:
    dla_core: int | None = None
    """None: the GPU."""

    @property
    def label(self) -> str:
        return "GPU" if self.dla_core is None else f"DLA {self.dla_core}"


def dla_cores(runtimes: Runtimes) -> int:
    """``IBuilder.num_DLA_cores``, asked of a builder made and dropped on a
    CUDA thread of its own. Raises EdgeboxError when no CUDA context can be made."""
    worker = CudaWorker(runtimes.cuda, DEVICE_ID, "selftest-dla-count")
    worker.start()
    try:
        return worker.call(lambda: EngineBuilder(runtimes.tensorrt).dla_cores)
    finally:
        worker.close()


def target_checks(
    target: Target,
    case: DetectorCase,
    runtimes: Runtimes,
    *,
    seconds: float,
    clock: Callable[[], float],
    read_power_mw: PowerReader | None,
) -> list[Check]:
    build = f"{target.label} build"
    try:
        options = _options(case, target)
    except EdgeboxError as exc:
        return [Check(SECTION, build, Status.FAIL, str(exc))]
    worker = CudaWorker(runtimes.cuda, DEVICE_ID, f"selftest-{target.label.replace(' ', '')}")
    try:
        device = worker.start()
    except EdgeboxError as exc:
        return [Check(SECTION, build, Status.FAIL, str(exc))]
    opened: list[EngineExecution] = []
    try:
        started = clock()
        try:
            built: BuildResult = worker.call(_build, runtimes.tensorrt, options)
            execution, inspected = worker.call(
                _load, runtimes, worker, built.plan, case.onnx_path, target, device
            )
            opened.append(execution)
            worker.call(execution.prepare, [0])
        except Exception as exc:  # TensorRT's and pycuda's own errors are the finding
            return [Check(SECTION, build, Status.FAIL, reason(exc))]
        build_s = clock() - started
        status, placement, facts = placement_line(target.dla_core, inspected, built.placement)
        facts.update(precision="fp16", build_s=round(build_s, 1), plan_bytes=len(built.plan))
        checks = [
            Check(SECTION, build, status, f"FP16, built in {build_s:.0f} s; {placement}", facts)
        ]

        wanted = [tensor.name for tensor in execution.io.outputs]
        answer = worker.call(_answer, execution, case.feeds, wanted)
        checks.append(_output(target, case, answer))
        if isinstance(answer, Exception):
            return checks

        def frame() -> None:
            execution.run(case.feeds, wanted)

        speed = f"{target.label} speed"
        try:
            figures = worker.call(run_for, frame, seconds, clock, read_power_mw)
        except Exception as exc:
            checks.append(Check(SECTION, speed, Status.FAIL, reason(exc)))
        else:
            checks.append(_speed(speed, figures))
        return checks
    finally:
        worker.close(teardown=opened[0].release if opened else None)


def _options(case: DetectorCase, target: Target) -> BuildOptions:
    """``edgebox build-engine``'s rules for these flags: FP16 (the DLA runs
    nothing in FP32), one fixed shape (the road frame's), GPU fallback on a DLA."""
    shapes = ",".join(f"'{name}':{format_shape(array.shape)}" for name, array in case.feeds.items())
    core = target.dla_core
    return parse_build_options(
        case.onnx_path,
        case.repository,
        DETECTOR,
        fp16=True,
        dla_core=str(core) if core is not None else None,
        gpu_fallback=core is not None,
        opt_shapes=shapes,
    )


def _build(tensorrt: Any, options: BuildOptions) -> BuildResult:
    """On the worker thread; the builder is dropped on return (see the module docstring)."""
    builder = EngineBuilder(tensorrt)
    builder.check_dla_core(options.dla_core)
    io = builder.parse(options.onnx_path)
    profile = resolve_profile(io, options.shapes, f"'{options.onnx_path.name}'")
    return builder.build(options, profile)


def _load(
    runtimes: Runtimes,
    worker: CudaWorker,
    plan: bytes,
    onnx_path: Path,
    target: Target,
    device: DeviceInfo,
) -> tuple[EngineExecution, Placement]:
    """On the worker thread, as the backend loads a ``tensorrt_plan`` model:
    TensorRT's plugins registered with the process's logger (the build left
    its own, now gone, as the plugins' logger), then ``open_engine``."""
    trt = runtimes.tensorrt
    logger = tensorrt_logger(trt)
    load_plugins([], trt, logger)
    return open_engine(
        trt,
        runtimes.cuda,
        worker,
        logger,
        plan,
        Path(f"{onnx_path.name} ({target.label} engine)"),
        DlaChoice(target.dla_core, "the self-test's build"),
        None,
        device,
    )


def _answer(execution: EngineExecution, feeds: Arrays, wanted: list[str]) -> Arrays | Exception:
    """On the worker thread: the answer, or what running it raised."""
    try:
        return execution.run(feeds, wanted)
    except Exception as exc:
        return exc


def _output(target: Target, case: DetectorCase, answer: Arrays | Exception) -> Check:
    name = f"{target.label} output"
    if isinstance(answer, Exception):
        return Check(SECTION, name, Status.FAIL, f"the engine did not answer: {reason(answer)}")
    problem = shape_problem(case.reference, answer)
    if problem:
        return Check(SECTION, name, Status.FAIL, problem)
    try:
        lanes = case.lanes(answer)
    except EdgeboxError as exc:
        return Check(SECTION, name, Status.FAIL, f"post-processing its answer failed: {exc}")
    return output_check(
        name,
        agreement(case.reference, answer, case.reference_lanes, lanes, case.max_px),
        case.max_px,
    )


def output_check(name: str, verdict: Agreement, max_px: float) -> Check:
    facts = {
        "lanes": verdict.lanes,
        "reference_lanes": verdict.reference_lanes,
        "max_px": max_px,
        "max_abs_diff": verdict.max_abs_diff,
        "non_finite": verdict.non_finite,
    }
    diff = f"max |diff| {verdict.worst_diff:.3g}"
    if not verdict.lanes_agree:
        return Check(SECTION, name, Status.FAIL, f"{verdict.detail}; {diff}", facts)
    lanes = f"{verdict.lanes} lanes, as ONNX Runtime's within {max_px:g} px"
    if verdict.non_finite:
        detail = f"{lanes}, but {verdict.non_finite} values NaN or infinite (FP16 overflow); {diff}"
        return Check(SECTION, name, Status.WARN, detail, facts)
    return Check(SECTION, name, Status.PASS, f"{lanes}; {diff}", facts)


def _speed(name: str, figures: RunFigures) -> Check:
    facts = {
        "frames": figures.frames,
        "seconds": round(figures.elapsed_s, 3),
        "fps": round(figures.fps, 2),
        "power_mw": round(figures.mean_power_mw) if figures.mean_power_mw is not None else None,
        "power_readings": len(figures.power_mw),
    }
    run = f"{figures.fps:.1f} fps over {figures.elapsed_s:.0f} s"
    if figures.mean_power_mw is None:
        return Check(SECTION, name, Status.WARN, f"{run}; board power not readable", facts)
    energy = figures.energy_per_frame_mj
    facts["energy_per_frame_mj"] = round(energy, 2) if energy is not None else None
    detail = f"{run}, board {figures.mean_power_mw / 1000:.1f} W"
    if energy is not None:
        detail += f" ({energy:.0f} mJ a frame)"
    return Check(SECTION, name, Status.PASS, detail, facts)


def reason(exc: BaseException) -> str:
    """An exception as a check's detail: edgebox's own message whole, a
    runtime's or a driver's first line with its type."""
    return str(exc) if isinstance(exc, EdgeboxError) else one_line(exc)
