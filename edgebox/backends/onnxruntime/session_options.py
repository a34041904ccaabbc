"""ONNX Runtime ``SessionOptions`` from a model's config.

The ``parameters`` Triton's onnxruntime backend documents
(``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode``,
``enable_mem_arena``, ``enable_mem_pattern``) and ``optimization.graph.level``
set the options of the same meaning; parameters named ``session.*`` are passed
to ONNX Runtime as session config entries under their own names when
``repository/backend_parameters.py`` allows them (none that reads or writes
files). ONNX Runtime's idle worker threads spin by default, which on a small
board costs a whole core between requests; edgebox turns spinning off unless
``session.intra_op.allow_spinning`` says otherwise. The custom-op libraries
``model_operations`` names are registered on the options too
(``custom_ops``), so the auto-complete probe session sees the ops as well.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from edgebox.backends import base
from edgebox.backends.onnxruntime.custom_ops import register_custom_ops
from edgebox.errors import InvalidArgument, one_line
from edgebox.repository.backend_parameters import ORT_SESSION_PREFIX, session_entry_problem

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


def session_options(ort: ModuleType, context: base.ModelContext) -> Any:
    """The ``ort.SessionOptions`` every session of the model gets; a value
    edgebox or ONNX Runtime refuses fails the load (InvalidArgument naming the
    parameter), never falls back to a default. ``ort`` is the onnxruntime
    module, handed in because it is imported only once a model loads."""
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
    register_custom_ops(options, context)
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
