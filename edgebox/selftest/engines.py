"""The engines section: the demo detector built into TensorRT engines on the
GPU and on each DLA core, each compared with ONNX Runtime and run for
``seconds`` while the board's power is read (``engine_target``).

What needs a Jetson is "not on this machine" anywhere else, never a pass.
On a Jetson, TensorRT and pycuda are what the TensorRT backend needs, so
their absence fails; a module without DLA cores (Orin Nano) has its DLA
line "not on this machine". It takes minutes: each build is TensorRT's
tactic search, then ``seconds`` of running per engine;
``edgebox selftest --no-engines`` leaves the section out and
``--engine-seconds`` shortens the runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from edgebox.backends import BackendCatalog
from edgebox.backends.tensorrt.backend import Runtimes
from edgebox.selftest.detector_case import DETECTOR, DetectorCase
from edgebox.selftest.engine_target import SECTION, Target, dla_cores, reason, target_checks
from edgebox.selftest.platform import Importer, import_or_none, on_jetson
from edgebox.selftest.report import Check, Status
from edgebox.selftest.timed_run import PowerReader
from edgebox.telemetry import choice
from edgebox.telemetry.source import TelemetrySource

__all__ = ["ENGINE_SECONDS", "SECTION", "engine_checks", "skipped"]

ENGINE_SECONDS = 20.0
"""How long each engine runs for its fps and power figures."""

PYCUDA_HINT = "pip install pycuda with CUDA on PATH (export PATH=/usr/local/cuda/bin:$PATH)"


def skipped() -> list[Check]:
    return [Check(SECTION, "engines", Status.SKIPPED, "left out (--no-engines)")]


def engine_checks(
    root: Path,
    repository: Path,
    *,
    seconds: float = ENGINE_SECONDS,
    importer: Importer = import_or_none,
    clock: Callable[[], float] = time.monotonic,
    catalog: BackendCatalog | None = None,
) -> list[Check]:
    """``root`` is where the platform is read (fixture trees in tests);
    ``importer`` and ``clock`` are the seams tests hand fakes through."""
    if not on_jetson(root):
        return [Check(SECTION, "engines", Status.ABSENT, "not a Jetson: no GPU engine or DLA")]
    tensorrt = importer("tensorrt")
    if tensorrt is None:
        return [
            Check(
                SECTION,
                "engines",
                Status.FAIL,
                "TensorRT is not importable: install JetPack's python3-libnvinfer",
            )
        ]
    cuda = importer("pycuda.driver")
    if cuda is None:
        return [Check(SECTION, "engines", Status.FAIL, f"pycuda is not importable: {PYCUDA_HINT}")]
    if not (repository / DETECTOR).is_dir():
        return [
            Check(
                SECTION,
                "detector",
                Status.SKIPPED,
                f"no model '{DETECTOR}' in '{repository}': the demo detector is what is built",
            )
        ]
    with ExitStack() as stack:
        try:
            case = stack.enter_context(DetectorCase(repository, catalog))
        except Exception as exc:  # a pipeline step's own error (a model.py, OpenCV) is the finding
            return [Check(SECTION, "detector", Status.FAIL, reason(exc))]
        checks = [_detector(case, str(tensorrt.__version__))]
        return checks + _targets(root, case, Runtimes(tensorrt, cuda), seconds, clock)


def _detector(case: DetectorCase, tensorrt_version: str) -> Check:
    lanes = int(case.reference_lanes["lane_scores"].size)
    facts = {
        "model": DETECTOR,
        "version": case.detector.version,
        "onnx": str(case.onnx_path),
        "ensemble": case.ensemble,
        "reference_lanes": lanes,
        "tensorrt": tensorrt_version,
    }
    where = f"{DETECTOR} version {case.detector.version} in '{case.ensemble}'"
    if lanes == 0:
        detail = f"{where}: ONNX Runtime finds no lane in the road frame, so lanes prove little"
        return Check(SECTION, "detector", Status.WARN, detail, facts)
    detail = (
        f"{where}: ONNX Runtime (CPU) finds {lanes} lanes in a drawn road frame; "
        f"TensorRT {tensorrt_version}"
    )
    return Check(SECTION, "detector", Status.PASS, detail, facts)


def _targets(
    root: Path,
    case: DetectorCase,
    runtimes: Runtimes,
    seconds: float,
    clock: Callable[[], float],
) -> list[Check]:
    """The GPU, then each DLA core; a DLA count that cannot be read fails
    its own line and leaves the GPU's standing."""
    absent: list[Check] = []
    try:
        cores = dla_cores(runtimes)
    except Exception as exc:  # no CUDA context: the GPU target says so too
        cores = 0
        absent.append(Check(SECTION, "DLA", Status.FAIL, f"DLA cores not countable: {reason(exc)}"))
    else:
        if cores == 0:
            absent.append(
                Check(
                    SECTION,
                    "DLA",
                    Status.ABSENT,
                    "this module has no DLA cores (Orin Nano has none)",
                )
            )
    targets = [Target(None), *(Target(core) for core in range(cores))]
    source = _telemetry(root)
    read_power = _power_reader(source) if source is not None else None
    checks: list[Check] = []
    try:
        for target in targets:
            checks += target_checks(
                target, case, runtimes, seconds=seconds, clock=clock, read_power_mw=read_power
            )
    finally:
        if source is not None:
            source.close()
    return checks + absent


def _telemetry(root: Path) -> TelemetrySource | None:
    """The source the daemon would pick, as the platform check opens it."""
    try:
        return choice.open_source("auto", root)
    except Exception:  # the platform section reports a source that will not open
        return None


def _power_reader(source: TelemetrySource) -> PowerReader:
    def read() -> float | None:
        return source.read().total_power_mw

    return read
