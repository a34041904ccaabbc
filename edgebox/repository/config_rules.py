"""Semantic rules for a parsed ``ModelConfig``, as Triton documents them:
the entry point (``check_model_config``) and the rules for any model's
tensors, version policy, instance groups, warm-up and named files. Sequence
batching and ensembles have rule sets of their own
(``sequence_batching_rules.py``, ``ensemble_rules.py``).

Pure functions over the message: each problem is returned as (field path,
message) so the caller can attach ``path:line:col`` from the field index.
"""

from __future__ import annotations

from collections.abc import Iterator

from tritonclient.grpc import model_config_pb2

from edgebox.repository.backend_parameters import (
    ORT_SESSION_PREFIX,
    TENSORRT_PLUGINS_PARAMETER,
    session_entry_problem,
    tensorrt_accelerator_problems,
)
from edgebox.repository.config_locator import Problem
from edgebox.repository.contained_path import WARMUP_FOLDER_LABEL, path_problem
from edgebox.repository.ensemble_rules import check_ensemble
from edgebox.repository.op_libraries import op_library_problems
from edgebox.repository.result_publishing import publishing_problems
from edgebox.repository.rollout_policy import rollout_problems
from edgebox.repository.scheduling_rules import check_scheduling
from edgebox.repository.sequence_batching_rules import check_sequence_batching

_FORMATS_WITH_3_DIMS = (
    model_config_pb2.ModelInput.FORMAT_NHWC,
    model_config_pb2.ModelInput.FORMAT_NCHW,
)


def check_model_config(config) -> list[Problem]:
    problems: list[Problem] = []
    is_ensemble = config.platform == "ensemble"
    if not config.platform and not config.backend:
        problems.append(
            (
                "platform",
                "neither 'platform' nor 'backend' is set, and no model.onnx, model.plan "
                "or model.py was found in a version folder to infer it",
            )
        )
    if config.max_batch_size < 0:
        problems.append(
            ("max_batch_size", f"max_batch_size must be >= 0, got {config.max_batch_size}")
        )
    problems += _check_tensors(config.input, "input", config.max_batch_size)
    problems += _check_tensors(config.output, "output", config.max_batch_size)
    problems += _check_version_policy(config.version_policy)
    for index, group in enumerate(config.instance_group):
        if group.count < 0:
            problems.append(
                (
                    f"instance_group[{index}].count",
                    f"instance_group count must be >= 0, got {group.count}",
                )
            )
    for index, warmup in enumerate(config.model_warmup):
        where = f"model_warmup[{index}]"
        if is_ensemble:
            problems.append((where, "an ensemble cannot have model_warmup; its steps' models can"))
        if warmup.batch_size < 1:
            problems.append((where, f"model_warmup '{warmup.name}': batch_size must be >= 1"))
        if not warmup.inputs:
            problems.append((where, f"model_warmup '{warmup.name}': list its inputs"))
    if is_ensemble:
        problems += check_ensemble(config)
    elif config.HasField("ensemble_scheduling"):
        problems.append(("ensemble_scheduling", 'ensemble_scheduling needs platform: "ensemble"'))
    if config.HasField("sequence_batching"):
        problems += check_sequence_batching(config)
    problems += check_scheduling(config)
    if config.response_cache.enable and config.model_transaction_policy.decoupled:
        problems.append(
            (
                "response_cache",
                f"Response Cache does not currently support model '{config.name}' with "
                "'decoupled' transaction policy. Please disable the response cache.",
            )
        )
    problems += _check_named_paths(config)
    problems += _check_passthrough(config)
    problems += [("parameters", problem) for problem in publishing_problems(config)]
    problems += [("parameters", problem) for problem in rollout_problems(config)]
    return problems


def _check_named_paths(config) -> Iterator[Problem]:
    """Every file the config names stays inside the model folder (see
    ``contained_path.py``); warm-up data inside ``<model>/warmup``."""
    for index, output in enumerate(config.output):
        if output.label_filename:
            problem = path_problem("label_filename", output.label_filename)
            if problem is not None:
                yield f"output[{index}].label_filename", f"output '{output.name}': {problem}"
    # Model files are named from a version folder; "1" stands for any of them.
    if config.default_model_filename:
        problem = path_problem("default_model_filename", config.default_model_filename, start="1")
        if problem is not None:
            yield "default_model_filename", problem
    for capability, filename in sorted(config.cc_model_filenames.items()):
        problem = path_problem(f"cc_model_filenames '{capability}'", filename, start="1")
        if problem is not None:
            yield "cc_model_filenames", problem
    for index, warmup in enumerate(config.model_warmup):
        for input_name, entry in sorted(warmup.inputs.items()):
            if entry.WhichOneof("input_data_type") != "input_data_file":
                continue
            problem = path_problem("input_data_file", entry.input_data_file, WARMUP_FOLDER_LABEL)
            if problem is not None:
                yield (
                    f"model_warmup[{index}]",
                    f"model_warmup '{warmup.name}', input '{input_name}': {problem}",
                )
    yield from op_library_problems(config)
    is_tensorrt = config.platform == "tensorrt_plan" or config.backend == "tensorrt"
    if is_tensorrt and TENSORRT_PLUGINS_PARAMETER in config.parameters:
        listed = config.parameters[TENSORRT_PLUGINS_PARAMETER].string_value
        for name in (part.strip() for part in listed.split(",")):
            problem = path_problem(f"parameters '{TENSORRT_PLUGINS_PARAMETER}' entry", name)
            if name and problem is not None:
                yield "parameters", problem


def _check_passthrough(config) -> Iterator[Problem]:
    """Settings handed to ONNX Runtime under their own names pass an allow-list
    (see ``backend_parameters.py``)."""
    if config.platform != "onnxruntime_onnx" and config.backend != "onnxruntime":
        return
    for key in sorted(config.parameters):
        if key.startswith(ORT_SESSION_PREFIX):
            problem = session_entry_problem(key)
            if problem is not None:
                yield "parameters", problem
    accelerators = config.optimization.execution_accelerators.gpu_execution_accelerator
    for index, accelerator in enumerate(accelerators):
        if accelerator.name != "tensorrt":
            continue
        where = f"optimization.execution_accelerators.gpu_execution_accelerator[{index}]"
        for problem in tensorrt_accelerator_problems(dict(accelerator.parameters)):
            yield where, f"execution accelerator 'tensorrt': {problem}"


def _check_tensors(tensors, kind: str, max_batch_size: int) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, tensor in enumerate(tensors):
        where = f"{kind}[{index}]"
        if not tensor.name:
            yield where, f"{kind} #{index} has no name"
            continue
        label = f"{kind} '{tensor.name}'"
        if tensor.name in seen:
            yield f"{where}.name", f"{label} is declared twice"
        seen.add(tensor.name)
        if tensor.data_type == model_config_pb2.TYPE_INVALID:
            yield where, f"{label}: data_type is not set"
        if not tensor.dims:
            yield (
                f"{where}.dims",
                (
                    f"{label}: dims must list at least one dimension "
                    "(for a scalar use dims: [ 1 ] with reshape: { shape: [ ] })"
                ),
            )
        bad = [d for d in tensor.dims if d < 1 and d != -1]
        if bad:
            yield (
                f"{where}.dims",
                f"{label}: each dim must be >= 1 or -1 (variable), got {list(tensor.dims)}",
            )
        if kind == "input" and tensor.format in _FORMATS_WITH_3_DIMS and len(tensor.dims) != 3:
            fmt = model_config_pb2.ModelInput.Format.Name(tensor.format)
            yield (
                f"{where}.dims",
                f"{label}: {fmt} needs 3 dims (without the batch dim), got {list(tensor.dims)}",
            )
        if tensor.HasField("reshape"):
            shape = list(tensor.reshape.shape)
            dims = list(tensor.dims)
            if -1 not in shape and -1 not in dims and _product(shape) != _product(dims):
                yield (
                    f"{where}.reshape",
                    (
                        f"{label}: reshape {shape} holds {_product(shape)} elements "
                        f"but dims {dims} hold {_product(dims)}"
                    ),
                )


def _check_version_policy(policy) -> Iterator[Problem]:
    choice = policy.WhichOneof("policy_choice")
    if choice == "latest" and policy.latest.num_versions < 1:
        yield (
            "version_policy.latest.num_versions",
            "version_policy latest: num_versions must be >= 1",
        )
    if choice == "specific":
        if not policy.specific.versions:
            yield "version_policy.specific", "version_policy specific: list at least one version"
        negative = [v for v in policy.specific.versions if v < 0]
        if negative:
            yield (
                "version_policy.specific",
                f"version_policy specific: versions must be >= 0, got {negative}",
            )


def _product(values: list[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result
