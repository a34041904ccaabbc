"""The ``tensorrt_plan`` backend: loads ``model.plan`` into instances that run
on a GPU or a DLA core.

Load order for a version: the model file must exist; TensorRT, then pycuda
are imported (a machine without them gets that as the reason); the sidecar
``engine_build.json`` is read if present; plugin libraries named by the config
are loaded; then a CUDA thread for the first instance group deserializes the
engine (see ``engine_loader``) and auto-complete fills and checks the config
from its I/O. That first engine becomes the first instance whose GPU and DLA
core match it, so the common single-instance model deserializes once. Each
further instance deserializes its own copy on its own CUDA thread.

``Backend(runtimes=...)`` is the seam for tests: it returns the TensorRT and
pycuda modules to drive; the default imports the real ones on first use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2

from edgebox.backends import base
from edgebox.backends.sequence_io import state_outputs
from edgebox.backends.tensorrt.autocomplete import complete_and_check
from edgebox.backends.tensorrt.compatibility import (
    EngineBuildInfo,
    device_name_note,
    read_build_info,
)
from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.backends.tensorrt.engine_loader import DlaChoice, open_engine
from edgebox.backends.tensorrt.execution import EngineExecution
from edgebox.backends.tensorrt.imports import import_pycuda_driver, import_tensorrt
from edgebox.backends.tensorrt.instance import TensorRTInstance
from edgebox.backends.tensorrt.placement import Placement
from edgebox.backends.tensorrt.plugins import load_plugins, plugin_libraries
from edgebox.backends.tensorrt.profiles import ProfileNameError, allowed_profiles
from edgebox.backends.tensorrt.trt_logger import tensorrt_logger
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.tensors import config_type_to_datatype

log = logging.getLogger(__name__)

_Group = model_config_pb2.ModelInstanceGroup


@dataclass(frozen=True)
class Runtimes:
    """The modules the backend drives: ``tensorrt`` and ``pycuda.driver``."""

    tensorrt: Any
    cuda: Any
    open_library: Callable[[str], object] | None = None
    """Opens a plugin library; None: ``ctypes.CDLL(path, RTLD_GLOBAL)``."""


def import_runtimes() -> Runtimes:
    return Runtimes(import_tensorrt(), import_pycuda_driver())


@dataclass
class _OpenedEngine:
    worker: CudaWorker
    execution: EngineExecution
    device_id: int
    dla_core: int | None
    placement: Placement
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.worker.close(teardown=self.execution.release)


class Backend(base.Backend):
    name = "tensorrt"

    def __init__(self, runtimes: Callable[[], Runtimes] = import_runtimes) -> None:
        self._runtimes = runtimes
        self._probes: dict[tuple[str, int], _OpenedEngine] = {}
        self._lock = threading.Lock()

    def complete_config(self, context: base.ModelContext) -> None:
        model_path = context.model_file()
        runtimes = self._runtimes()
        self.unload(context)
        config = context.config
        for each in config.instance_group:
            if each.kind == _Group.KIND_CPU:
                raise Unavailable(_cpu_refused(context, each.name))
        group = config.instance_group[0] if config.instance_group else None
        device_id = group.gpus[0] if group is not None and group.gpus else 0
        nvdla = _nvdla_ids(group.secondary_devices) if group is not None else []
        build_info = _build_info(context)
        group_name = group.name if group is not None else context.name
        dla = _dla_choice(context, group_name, nvdla, build_info, model_path)
        opened = self._open(
            context, runtimes, model_path, device_id, dla, build_info, f"{group_name}_0"
        )
        try:
            complete_and_check(context, opened.execution.io, model_path)
        except BaseException:
            opened.close()
            raise
        with self._lock:
            self._probes[(context.name, context.version)] = opened

    def load_instance(
        self, context: base.ModelContext, instance: base.InstanceSpec
    ) -> TensorRTInstance:
        model_path = context.model_file()
        runtimes = self._runtimes()
        group = _group_of(context.config, instance.name)
        group_name = group.name if group is not None else instance.name
        if instance.kind == "CPU":
            if group is not None and group.kind == _Group.KIND_AUTO:
                raise Unavailable(
                    f"{context.where}: no GPU found on this machine (instance_group "
                    f"'{group_name}' is KIND_AUTO), and TensorRT engines need one"
                )
            raise Unavailable(_cpu_refused(context, group_name))
        build_info = _build_info(context)
        nvdla = [device for kind, device in instance.secondary_devices if kind == "KIND_NVDLA"]
        dla = _dla_choice(context, group_name, nvdla, build_info, model_path)
        opened = self._take_probe(context, instance.device_id, dla.core)
        if opened is None:
            opened = self._open(
                context, runtimes, model_path, instance.device_id, dla, build_info, instance.name
            )
        try:
            profiles = list(group.profile) if group is not None else []
            allowed = allowed_profiles(profiles, len(opened.execution.io.profiles))
            opened.worker.call(opened.execution.prepare, allowed)
        except ProfileNameError as exc:
            opened.close()
            raise Unavailable(f"{context.where}: {exc}") from None
        except EdgeboxError as exc:
            opened.close()
            raise Unavailable(_located(context, exc)) from None
        except BaseException:
            opened.close()
            raise
        for note in opened.notes:
            if note not in context.notes:
                context.notes.append(note)
                log.info("%s: %s", context.where, note)
        datatypes = {
            o.name: config_type_to_datatype(model_config_pb2.DataType.Name(o.data_type))
            for o in context.config.output
        }
        return TensorRTInstance(
            context.where,
            context.name,
            context.version,
            opened.worker,
            opened.execution,
            datatypes,
            context.config.max_batch_size,
            {t.name: config_type_to_datatype(t.config_type) for t in state_outputs(context.config)},
        )

    def unload(self, context: base.ModelContext) -> None:
        with self._lock:
            probe = self._probes.pop((context.name, context.version), None)
        if probe is not None:
            probe.close()

    def _take_probe(
        self, context: base.ModelContext, device_id: int, dla_core: int | None
    ) -> _OpenedEngine | None:
        key = (context.name, context.version)
        with self._lock:
            probe = self._probes.get(key)
            if probe is not None and (probe.device_id, probe.dla_core) == (device_id, dla_core):
                return self._probes.pop(key)
        return None

    def _open(
        self,
        context: base.ModelContext,
        runtimes: Runtimes,
        model_path: Path,
        device_id: int,
        dla: DlaChoice,
        build_info: EngineBuildInfo | None,
        name: str,
    ) -> _OpenedEngine:
        trt, cuda = runtimes.tensorrt, runtimes.cuda
        logger = tensorrt_logger(trt)
        try:
            libraries = plugin_libraries(context.config, context.model_dir)
            load_plugins(libraries, trt, logger, runtimes.open_library)
        except EdgeboxError as exc:
            raise Unavailable(_located(context, exc)) from None
        try:
            plan = model_path.read_bytes()
        except OSError as exc:
            raise Unavailable(f"{context.where}: cannot read '{model_path}': {exc}") from None
        worker = CudaWorker(cuda, device_id, f"{context.name}_{context.version}_{name}")
        try:
            device = worker.start()
        except EdgeboxError as exc:
            raise Unavailable(_located(context, exc)) from None
        try:
            execution, placement = worker.call(
                open_engine, trt, cuda, worker, logger, plan, model_path, dla, build_info, device
            )
        except BaseException as exc:
            worker.close()
            if isinstance(exc, EdgeboxError):
                raise Unavailable(_located(context, exc)) from None
            if isinstance(exc, Exception):
                log.exception("%s: loading '%s' raised", context.where, model_path)
                raise Unavailable(
                    f"{context.where}: TensorRT failed to load '{model_path}': "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            raise
        notes = [placement.summary()]
        if build_info is not None and (note := device_name_note(build_info, device)):
            notes.append(note)
        return _OpenedEngine(worker, execution, device_id, dla.core, placement, notes)


def _cpu_refused(context: base.ModelContext, group_name: str) -> str:
    return (
        f"{context.where}: TensorRT engines run on a GPU, but instance_group '{group_name}' "
        "asks for KIND_CPU"
    )


def _build_info(context: base.ModelContext) -> EngineBuildInfo | None:
    try:
        return read_build_info(context.version_dir)
    except EdgeboxError as exc:
        raise Unavailable(_located(context, exc)) from None


def _dla_choice(
    context: base.ModelContext,
    group_name: str,
    nvdla: list[int],
    build_info: EngineBuildInfo | None,
    model_path: Path,
) -> DlaChoice:
    """The DLA core to deserialize for: the instance's ``KIND_NVDLA`` secondary
    device, else the core the sidecar says the engine was built for."""
    config_path = context.model_dir / "config.pbtxt"
    if len(nvdla) > 1:
        raise Unavailable(
            f"{context.where}: {config_path}: instance_group '{group_name}' lists {len(nvdla)} "
            "KIND_NVDLA secondary devices; an instance runs on one DLA core"
        )
    if nvdla:
        core = nvdla[0]
        source = (
            f"{config_path}: instance_group '{group_name}' secondary_devices "
            f"{{ kind: KIND_NVDLA device_id: {core} }}"
        )
        if build_info is not None and build_info.dla_core is None:
            raise Unavailable(
                f"{context.where}: {source} asks for DLA core {core}, but '{model_path}' was "
                f"built for the GPU ({build_info.path} has dla_core null); rebuild it for the "
                "DLA or remove the secondary device"
            )
        return DlaChoice(core, source)
    if build_info is not None and build_info.dla_core is not None:
        return DlaChoice(build_info.dla_core, f"{build_info.path}: dla_core")
    return DlaChoice(None)


def _nvdla_ids(secondary_devices) -> list[int]:
    kind = _Group.SecondaryDevice.SecondaryDeviceKind.Value("KIND_NVDLA")
    return [d.device_id for d in secondary_devices if d.kind == kind]


def _group_of(config, instance_name: str):
    """The instance group an instance comes from: instances are named
    ``<group name>_<index>``."""
    prefix = instance_name.rsplit("_", 1)[0]
    for group in config.instance_group:
        if group.name == prefix:
            return group
    return None


def _located(context: base.ModelContext, exc: EdgeboxError) -> str:
    text = str(exc)
    return text if text.startswith(context.where) else f"{context.where}: {text}"
