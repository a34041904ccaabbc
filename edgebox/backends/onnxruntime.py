"""ONNX Runtime sessions for ``platform: "onnxruntime_onnx"``.

One session per instance, as Triton's onnxruntime backend does. GPU instances use
the CUDA execution provider (and TensorRT's, when the config asks for it under
``optimization.execution_accelerators``) where this onnxruntime build has them;
otherwise they run on the CPU and the model says so in its notes rather than
failing, so a repository written for an Orin still serves on a dev machine.
Session options come from the config ``parameters`` Triton documents
(``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode``,
``enable_mem_arena``, ``enable_mem_pattern``) and ``optimization.graph.level``;
parameters named ``session.*`` are passed to ONNX Runtime as session config
entries under their own names when ``repository/backend_parameters.py`` allows
them (none that reads or writes files), and so are the TensorRT execution
provider's options (cache folders inside the model folder only). ONNX Runtime's
idle worker threads spin by default, which on a small board costs a whole core
between requests; edgebox turns spinning off unless
``session.intra_op.allow_spinning`` says otherwise.
Spec: https://github.com/triton-inference-server/onnxruntime_backend
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.backends import base
from edgebox.backends.sequence_io import SequenceTensor, sequence_inputs, state_outputs
from edgebox.backends.stacked_batch import split_rows, stack_inputs, stackable
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable, one_line
from edgebox.repository.backend_parameters import (
    ORT_SESSION_PREFIX,
    TENSORRT_EP_CACHE_PATHS,
    session_entry_problem,
    tensorrt_accelerator_problems,
)
from edgebox.repository.contained_path import resolve_inside
from edgebox.tensors import (
    InferRequest,
    InferResponse,
    RequestedOutput,
    Tensor,
    config_type_to_datatype,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_SIZE = 4
"""Triton's ``default-max-batch-size``: what auto-complete sets for a batchable model."""

_CONFIG_TYPE_BY_ORT = {
    "tensor(bool)": "TYPE_BOOL",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
    "tensor(bfloat16)": "TYPE_BF16",
}
_GRAPH_LEVELS = {-1: "ORT_ENABLE_BASIC", 1: "ORT_ENABLE_EXTENDED", 2: "ORT_DISABLE_ALL"}
_THREAD_COUNTS = {
    "intra_op_thread_count": "intra_op_num_threads",
    "inter_op_thread_count": "inter_op_num_threads",
}
"""Config parameter -> SessionOptions attribute."""
_SESSION_ENTRY_DEFAULTS = {
    "session.intra_op.allow_spinning": "0",
    "session.inter_op.allow_spinning": "0",
}


def _import_onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:
        raise Unavailable(
            f"ONNX Runtime is not installed ({exc}); install 'onnxruntime' "
            "(or NVIDIA's onnxruntime-gpu wheel on a Jetson)"
        ) from None
    return onnxruntime


class Backend(base.Backend):
    name = "onnxruntime"

    def __init__(self) -> None:
        self._probe_sessions: dict[tuple[str, int], object] = {}

    def complete_config(self, context: base.ModelContext) -> None:
        ort = _import_onnxruntime()
        model_path = context.model_file()
        session = self._create_session(ort, context, model_path, "CPU", 0)
        self._probe_sessions[(context.name, context.version)] = session
        _complete_and_check(context, session, model_path)

    def load_instance(
        self, context: base.ModelContext, instance: base.InstanceSpec
    ) -> OnnxInstance:
        ort = _import_onnxruntime()
        providers = _providers_for(ort, context, instance)
        probe = self._probe_sessions.pop((context.name, context.version), None)
        if probe is not None and probe.get_providers() == [
            p if isinstance(p, str) else p[0] for p in providers
        ]:
            session = probe
        else:
            session = self._create_session(
                ort, context, context.model_file(), instance.kind, instance.device_id
            )
        return OnnxInstance(context, session)

    def unload(self, context: base.ModelContext) -> None:
        self._probe_sessions.pop((context.name, context.version), None)

    def _create_session(
        self, ort, context: base.ModelContext, model_path, kind: str, device_id: int
    ):
        options = _session_options(ort, context)
        providers = _providers_for(ort, context, base.InstanceSpec("probe", kind, device_id))
        try:
            return ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
        except Exception as exc:
            raise Unavailable(
                f"{context.where}: ONNX Runtime cannot load '{model_path}': {one_line(exc)}"
            ) from None


class OnnxInstance:
    """One ONNX Runtime session. ``InferenceSession.run`` releases the GIL, so
    instances of different models run in parallel on the CPU cores."""

    def __init__(self, context: base.ModelContext, session) -> None:
        self._session = session
        self._model_name = context.name
        self._version = str(context.version)
        self._where = context.where
        config = context.config
        self._output_names = [o.name for o in config.output]
        self._datatypes = {
            o.name: config_type_to_datatype(model_config_pb2.DataType.Name(o.data_type))
            for o in config.output
        }
        for state in state_outputs(config):
            self._datatypes.setdefault(state.name, config_type_to_datatype(state.config_type))
        self._string_inputs = {
            i.name for i in config.input if i.data_type == model_config_pb2.TYPE_STRING
        } | {t.name for t in sequence_inputs(config) if t.config_type == "TYPE_STRING"}
        model_ranks = {i.name: len(i.shape or []) for i in session.get_inputs()}
        self._flattened_controls = {
            t.name for t in sequence_inputs(config) if t.is_control and model_ranks.get(t.name) == 1
        }
        """Controls of a batching model whose model shape is [batch] rather than
        [batch, 1]: the scheduler sends [batch, 1], flattened before the run."""

    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        """One request runs as it is; several (a dynamic batch, all with the same
        shapes apart from the batch dimension) run as one session call on their
        inputs concatenated, and each gets its rows of the outputs as views."""
        if len(requests) == 1 or not stackable(requests):
            return [self._run(request) for request in requests]
        return self._run_batch(requests)

    def _run_batch(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        first = requests[0]
        stacked = stack_inputs(requests)
        inputs = [Tensor(t.name, t.datatype, stacked[t.name]) for t in first.inputs]
        wanted: set[str] = set()
        for request in requests:
            wanted.update([o.name for o in request.outputs] or self._output_names)
        outputs = [RequestedOutput(n) for n in self._datatypes if n in wanted]
        merged = self._run(InferRequest(first.model_name, inputs, outputs=outputs))
        if isinstance(merged, EdgeboxError):
            return [merged] * len(requests)
        try:
            rows = split_rows(self._where, {t.name: t.data for t in merged.outputs}, requests)
        except EdgeboxError as error:
            return [error] * len(requests)
        return [
            InferResponse(
                self._model_name,
                self._version,
                [Tensor(t.name, t.datatype, own[t.name]) for t in merged.outputs],
                id=request.id,
            )
            for request, own in zip(requests, rows, strict=True)
        ]

    def _run(self, request: InferRequest) -> InferResponse | EdgeboxError:
        feeds = {}
        for tensor in request.inputs:
            if tensor.datatype == "BF16":
                return InvalidArgument(
                    f"{self._where}, input '{tensor.name}': BF16 tensors cannot be passed to "
                    "ONNX Runtime's Python API"
                )
            data = tensor.data
            if tensor.name in self._string_inputs:
                data = np.vectorize(_as_text, otypes=[object])(data) if data.size else data
            if tensor.name in self._flattened_controls and data.ndim == 2:
                data = data.reshape(-1)
            feeds[tensor.name] = data
        names = [o.name for o in request.outputs] or self._output_names
        try:
            results = self._session.run(names, feeds)
        except Exception as exc:
            return EdgeboxError(f"{self._where}: ONNX Runtime failed: {one_line(exc)}")
        outputs = []
        for name, array in zip(names, results, strict=True):
            datatype = self._datatypes[name]
            if datatype == "BYTES":
                array = (
                    np.vectorize(_as_bytes, otypes=[object])(array)
                    if array.size
                    else array.astype(object)
                )
            outputs.append(Tensor(name, datatype, array))
        return InferResponse(self._model_name, self._version, outputs, id=request.id)

    def close(self) -> None:
        self._session = None


def _as_text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def _session_options(ort, context: base.ModelContext):
    config = context.config
    options = ort.SessionOptions()
    params = {key: value.string_value for key, value in config.parameters.items()}

    def int_param(key: str) -> int | None:
        if key not in params:
            return None
        try:
            return int(params[key])
        except ValueError:
            raise InvalidArgument(
                f"{context.where}: parameter '{key}' must be an integer, got '{params[key]}'"
            ) from None

    for key, option in _THREAD_COUNTS.items():
        if (value := int_param(key)) is not None:
            _check_thread_count(context, key, value)
            setattr(options, option, value)
    if (value := int_param("execution_mode")) is not None:
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if value == 1 else ort.ExecutionMode.ORT_SEQUENTIAL
        )
    if (value := int_param("enable_mem_arena")) is not None:
        options.enable_cpu_mem_arena = bool(value)
    if (value := int_param("enable_mem_pattern")) is not None:
        options.enable_mem_pattern = bool(value)
    level = config.optimization.graph.level
    if level in _GRAPH_LEVELS:
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _GRAPH_LEVELS[level])
    entries = dict(_SESSION_ENTRY_DEFAULTS)
    for key, value in params.items():
        if key.startswith(ORT_SESSION_PREFIX):
            problem = session_entry_problem(key)
            if problem is not None:
                raise InvalidArgument(f"{context.where}: {problem}")
            entries[key] = value
    for key, value in entries.items():
        try:
            options.add_session_config_entry(key, value)
        except Exception as exc:
            raise InvalidArgument(
                f"{context.where}: parameter '{key}' = '{value}' rejected by ONNX Runtime: "
                f"{one_line(exc)}"
            ) from None
    options.log_severity_level = 3
    return options


def _check_thread_count(context: base.ModelContext, key: str, value: int) -> None:
    """Each thread count is held to ``max_threads_per_instance``: one config
    asking for 800 threads must not get them. 0 is ONNX Runtime's default (one
    per physical core), within the limit by construction."""
    if value < 0:
        raise InvalidArgument(
            f"{context.where}: parameter '{key}' must be >= 0 (0: ONNX Runtime's default), "
            f"got {value}"
        )
    most = context.max_threads_per_instance
    if most is not None and value > most:
        raise InvalidArgument(
            f"{context.where}: parameter '{key}' is {value}, more than the {most} threads "
            "allowed per instance (setting 'max_threads_per_instance')"
        )


def _providers_for(ort, context: base.ModelContext, instance: base.InstanceSpec) -> list:
    available = set(ort.get_available_providers())
    if instance.kind != "GPU":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in available:
        note = "CUDA execution provider not in this onnxruntime build; running on the CPU"
        if note not in context.notes:
            context.notes.append(note)
            log.warning("%s: %s", context.where, note)
        return ["CPUExecutionProvider"]
    providers: list = []
    accelerators = context.config.optimization.execution_accelerators.gpu_execution_accelerator
    for accelerator in accelerators:
        if accelerator.name == "tensorrt" and "TensorrtExecutionProvider" in available:
            given = dict(accelerator.parameters)
            problems = tensorrt_accelerator_problems(given)
            if problems:
                raise InvalidArgument(
                    f"{context.where}: execution accelerator 'tensorrt': {problems[0]}"
                )
            options = {"device_id": instance.device_id}
            for key, value in given.items():
                if key == "precision_mode":
                    options["trt_fp16_enable"] = value.upper() == "FP16"
                    options["trt_int8_enable"] = value.upper() == "INT8"
                elif key == "max_workspace_size_bytes":
                    options["trt_max_workspace_size"] = int(value)
                elif key in TENSORRT_EP_CACHE_PATHS:
                    # ONNX Runtime creates the folder and writes engines into it.
                    options[key] = str(
                        resolve_inside(
                            context.model_dir,
                            value,
                            f"accelerator parameter '{key}'",
                            context.where,
                        )
                    )
                else:
                    options[key] = value
            providers.append(("TensorrtExecutionProvider", options))
    providers.append(("CUDAExecutionProvider", {"device_id": instance.device_id}))
    providers.append("CPUExecutionProvider")
    return providers


def _complete_and_check(context: base.ModelContext, session, model_path) -> None:
    """Triton's auto-complete for ONNX, then a strict comparison of config and model."""
    config = context.config
    config_path = context.model_dir / "config.pbtxt"
    model_inputs = {i.name: _model_tensor(i) for i in session.get_inputs()}
    model_outputs = {o.name: _model_tensor(o) for o in session.get_outputs()}

    if not config.input and not config.output and config.max_batch_size == 0:
        everything = list(model_inputs.values()) + list(model_outputs.values())
        if everything and all(shape and shape[0] == -1 for _, shape in everything):
            config.max_batch_size = DEFAULT_MAX_BATCH_SIZE
    batch = 1 if config.max_batch_size > 0 else 0
    sequence_names = {t.name for t in (*sequence_inputs(config), *state_outputs(config))}
    if not config.input:
        _fill(config.input, _without(model_inputs, sequence_names), batch)
    if not config.output:
        _fill(config.output, _without(model_outputs, sequence_names), batch)

    def mismatch(text: str) -> Unavailable:
        return Unavailable(f"{context.where}: {config_path} does not match {model_path}: {text}")

    for kind, declared, actual in (
        ("input", config.input, model_inputs),
        ("output", config.output, model_outputs),
    ):
        for tensor in declared:
            found = actual.get(tensor.name)
            if found is None:
                names = ", ".join(f"'{n}'" for n in actual) or "none"
                raise mismatch(f"{kind} '{tensor.name}' is not in the model (its {kind}s: {names})")
            model_type, model_shape = found
            config_type = model_config_pb2.DataType.Name(tensor.data_type)
            if config_type != model_type:
                raise mismatch(
                    f"{kind} '{tensor.name}': config says {config_type}, model has {model_type}"
                )
            dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
            config_shape = [-1] * batch + dims
            if batch and model_shape and model_shape[0] != -1:
                raise mismatch(
                    f"{kind} '{tensor.name}': max_batch_size {config.max_batch_size} needs a "
                    f"variable first dimension, but the model's shape is {model_shape}"
                )
            if not _shapes_compatible(config_shape, model_shape):
                raise mismatch(
                    f"{kind} '{tensor.name}': config shape {config_shape} "
                    f"(max_batch_size {config.max_batch_size}) vs model shape {model_shape}"
                )
    for tensor in sequence_inputs(config):
        _check_sequence_tensor(tensor, model_inputs, "input", batch, mismatch)
    for tensor in state_outputs(config):
        _check_sequence_tensor(tensor, model_outputs, "output", batch, mismatch)
    declared_inputs = {t.name for t in config.input} | {t.name for t in sequence_inputs(config)}
    missing = [n for n in model_inputs if n not in declared_inputs]
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        raise mismatch(f"the model needs input(s) {names}, which the config does not declare")


def _check_sequence_tensor(
    tensor: SequenceTensor,
    actual: dict[str, tuple[str, list[int]]],
    kind: str,
    batch: int,
    mismatch,
) -> None:
    """A control must be [1] past the batch dimension (Triton's onnxruntime
    backend), or, batched, just [batch]: the instance flattens what the
    scheduler sends. A state must fit state.dims, where -1 on either side
    matches anything."""
    found = actual.get(tensor.name)
    if found is None:
        names = ", ".join(f"'{n}'" for n in actual) or "none"
        raise mismatch(f"{tensor.origin} is not in the model (its {kind}s: {names})")
    model_type, model_shape = found
    if model_type != tensor.config_type:
        raise mismatch(f"{tensor.origin}: config says {tensor.config_type}, model has {model_type}")
    if batch and (not model_shape or model_shape[0] != -1):
        raise mismatch(
            f"{tensor.origin}: sequence batching with a max_batch_size needs a variable first "
            f"dimension, but the model's shape is {model_shape}"
        )
    rest = model_shape[batch:]
    if tensor.is_control:
        fits = rest in ([1], [-1]) or (batch == 1 and rest == [])
        expected = "[-1, 1] or [-1]" if batch else "[1]"
    else:
        fits = len(rest) == len(tensor.dims) and all(
            m == -1 or c == -1 or c == m for c, m in zip(tensor.dims, rest, strict=True)
        )
        expected = str([-1] * batch + list(tensor.dims))
    if not fits:
        raise mismatch(f"{tensor.origin}: model shape {model_shape}, expected {expected}")


def _without(tensors: dict[str, tuple[str, list[int]]], names: set[str]) -> dict:
    return {name: found for name, found in tensors.items() if name not in names}


def _fill(container, tensors: dict[str, tuple[str, list[int]]], batch: int) -> None:
    for name, (type_name, shape) in tensors.items():
        tensor = container.add()
        tensor.name = name
        tensor.data_type = model_config_pb2.DataType.Value(type_name)
        dims = shape[batch:] if batch else shape
        tensor.dims.extend(dims or [1])
        if not dims:
            tensor.reshape.SetInParent()


def _model_tensor(node) -> tuple[str, list[int]]:
    type_name = _CONFIG_TYPE_BY_ORT.get(node.type, f"unsupported {node.type}")
    shape = [d if isinstance(d, int) and d >= 0 else -1 for d in (node.shape or [])]
    return type_name, shape


def _shapes_compatible(config_shape: list[int], model_shape: list[int]) -> bool:
    if len(config_shape) != len(model_shape):
        return False
    return all(m == -1 or c == m for c, m in zip(config_shape, model_shape, strict=True))
