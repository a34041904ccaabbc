"""Deserializing ``model.plan`` on an instance's CUDA thread, with every check
that turns a TensorRT failure into a reason.

Order matters: the sidecar is compared before anything is deserialized; the
DLA core is checked against ``runtime.num_DLA_cores`` and set on the runtime
before ``deserialize_cuda_engine`` (TensorRT reads it there); plugin libraries
were loaded by the caller before this runs. TensorRT objects made here are
dropped on this thread if a later check fails, never left to a traceback that
another thread frees.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from edgebox.backends.tensorrt.compatibility import (
    DeviceInfo,
    EngineBuildInfo,
    build_mismatch,
    deserialize_failure,
    dla_problem,
)
from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.backends.tensorrt.engine_io import describe_engine
from edgebox.backends.tensorrt.execution import EngineExecution
from edgebox.backends.tensorrt.placement import Placement, summarize_placement
from edgebox.errors import Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DlaChoice:
    core: int | None
    """None: the GPU only."""
    source: str = ""
    """Where the core number came from, for reasons: a config line or the sidecar."""


def open_engine(
    trt,
    cuda,
    worker: CudaWorker,
    logger,
    plan: bytes,
    model_path: Path,
    dla: DlaChoice,
    build_info: EngineBuildInfo | None,
    device: DeviceInfo,
) -> tuple[EngineExecution, Placement]:
    """Run on ``worker``'s thread. Raises Unavailable with the reason."""
    worker.check_owner()
    if build_info is not None:
        reason = build_mismatch(build_info, model_path, trt.__version__, device)
        if reason:
            raise Unavailable(reason)
    runtime = trt.Runtime(logger)
    try:
        if dla.core is not None:
            problem = dla_problem(dla.core, runtime.num_DLA_cores, device, dla.source)
            if problem:
                raise Unavailable(problem)
            runtime.DLA_core = dla.core
        with logger.capture() as messages:
            try:
                engine = runtime.deserialize_cuda_engine(plan)
            except Exception as exc:
                messages.append(f"{type(exc).__name__}: {exc}")
                engine = None
        if engine is None:
            raise Unavailable(deserialize_failure(messages, model_path, trt.__version__))
        try:
            io = describe_engine(trt, engine)
            problems = io.problems()
            if problems:
                raise Unavailable(f"'{model_path}': " + "; ".join(problems))
            placement = _placement(trt, engine, dla.core)
            return EngineExecution(trt, cuda, worker, runtime, engine, io), placement
        except BaseException:
            engine = None
            raise
    except BaseException:
        runtime = None
        raise


def _placement(trt, engine, dla_core: int | None) -> Placement:
    try:
        inspector = engine.create_engine_inspector()
        information = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
    except Exception as exc:
        log.warning("engine inspector failed: %s", exc)
        return Placement(dla_core, unknown_reason=f"the engine inspector failed ({exc})")
    finally:
        inspector = None
    return summarize_placement(information, dla_core)
