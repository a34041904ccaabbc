"""Which backend passthrough settings a config may carry.

Some config entries are handed to a runtime under their own names: ONNX
Runtime session config entries (``parameters { key: "session.*" }``) and the
TensorRT execution provider's options
(``optimization.execution_accelerators.gpu_execution_accelerator { name: "tensorrt" }``).
Several of those read or write files anywhere on disk
(``session.collect_node_memory_stats_to_file`` truncates its file at the first
inference), so each is an allow-list: keys known to be harmless pass, keys
that touch files are refused by name, and unknown keys are refused too, since
a newer runtime may add one that writes files. The rule is the same for
``config.pbtxt`` and for a load request's config.

ONNX Runtime's keys: https://github.com/microsoft/onnxruntime/blob/main/include/onnxruntime/core/session/onnxruntime_session_options_config_keys.h
Triton's TensorRT accelerator options: https://github.com/triton-inference-server/onnxruntime_backend#onnx-runtime-with-tensorrt-optimization
"""

from __future__ import annotations

from edgebox.repository.contained_path import path_problem

ORT_SESSION_PREFIX = "session."

TENSORRT_PLUGINS_PARAMETER = "plugins"
"""The ``tensorrt_plan`` config parameter listing plugin libraries, comma-separated."""

ORT_SESSION_ENTRIES = frozenset(
    {
        "session.intra_op.allow_spinning",
        "session.inter_op.allow_spinning",
        "session.force_spinning_stop",
        "session.dynamic_block_base",
        "session.intra_op_thread_affinities",
        "session.use_env_allocators",
        "session.use_device_allocator_for_initializers",
        "session.disable_prepacking",
        "session.set_denormal_as_zero",
        "session.use_deterministic_compute",
        "session.disable_quant_qdq",
        "session.disable_double_qdq_remover",
        "session.enable_quant_qdq_cleanup",
        "session.qdqisint8allowed",
        "session.qdq_matmulnbits_accuracy_level",
        "session.x64quantprecision",
        "session.disable_aot_function_inlining",
        "session.strict_shape_type_inference",
        "session.allow_released_opsets_only",
        "session.disable_cpu_ep_fallback",
    }
)
"""Session config entries that only tune computation: no file, no thread count
(those go through ``intra_op_thread_count`` / ``inter_op_thread_count``)."""

ORT_SESSION_FILE_ENTRIES = frozenset(
    {
        "session.collect_node_memory_stats_to_file",
        "session.optimized_model_filepath",
        "session.optimized_model_external_initializers_file_name",
        "session.save_external_prepacked_constant_initializers",
        "session.model_external_initializers_file_folder_path",
        "session.debug_layout_transformation",
        "session.enable_profiling",
        "session.node_partition_config_file",
        "session.resource_cuda_partitioning_settings",
        "session.moe_expert_counter_state_file",
    }
)
"""Entries that make ONNX Runtime read or write a file named by the value (or
next to the model); named in the refusal so the reason is plain."""

TENSORRT_EP_OPTIONS = frozenset(
    {
        "precision_mode",
        "max_workspace_size_bytes",
        "trt_max_workspace_size",
        "trt_fp16_enable",
        "trt_int8_enable",
        "trt_max_partition_iterations",
        "trt_min_subgraph_size",
        "trt_layer_norm_fp32_fallback",
        "trt_dla_enable",
        "trt_dla_core",
        "trt_force_sequential_engine_build",
        "trt_context_memory_sharing_enable",
        "trt_force_timing_cache",
        "trt_detailed_build_log",
        "trt_build_heuristics_enable",
        "trt_sparsity_enable",
        "trt_builder_optimization_level",
        "trt_auxiliary_streams",
        "trt_tactic_sources",
        "trt_profile_min_shapes",
        "trt_profile_max_shapes",
        "trt_profile_opt_shapes",
        "trt_cuda_graph_enable",
        "trt_engine_cache_enable",
        "trt_timing_cache_enable",
    }
)
"""TensorRT execution provider options that name no file."""

TENSORRT_EP_CACHE_PATHS = {
    "trt_engine_cache_path": "trt_engine_cache_enable",
    "trt_timing_cache_path": "trt_timing_cache_enable",
}
"""Cache folders (a relative path inside the model folder), each with the
switch that makes ONNX Runtime write there."""


def session_entry_problem(key: str) -> str | None:
    """Why the ONNX Runtime session entry ``key`` is refused, or None."""
    if key in ORT_SESSION_ENTRIES:
        return None
    if key in ORT_SESSION_FILE_ENTRIES:
        return (
            f"parameter '{key}' makes ONNX Runtime read or write files, which a model "
            "config may not ask for"
        )
    return (
        f"parameter '{key}' is not an ONNX Runtime session entry edgebox passes on "
        f"(allowed: {', '.join(sorted(ORT_SESSION_ENTRIES))})"
    )


def tensorrt_accelerator_problems(options: dict[str, str]) -> list[str]:
    """What is wrong with a ``tensorrt`` execution accelerator's parameters."""
    problems = []
    for key, value in sorted(options.items()):
        if key in TENSORRT_EP_OPTIONS:
            continue
        if key in TENSORRT_EP_CACHE_PATHS:
            problem = path_problem(f"accelerator parameter '{key}'", value)
            if problem is not None:
                problems.append(problem)
            continue
        problems.append(
            f"accelerator parameter '{key}' is not a TensorRT execution provider option "
            f"edgebox passes on (allowed: "
            f"{', '.join(sorted(TENSORRT_EP_OPTIONS | TENSORRT_EP_CACHE_PATHS.keys()))})"
        )
    for path_key, switch in TENSORRT_EP_CACHE_PATHS.items():
        if _is_on(options.get(switch, "")) and not options.get(path_key):
            problems.append(
                f"accelerator parameter '{switch}' needs '{path_key}', a folder inside the "
                "model folder (the default would be the daemon's working directory)"
            )
    return problems


def _is_on(value: str) -> bool:
    return value.strip().lower() in ("1", "true")
