"""Semantic rules for a parsed ``ModelConfig``, as Triton documents them.

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
from edgebox.repository.contained_path import WARMUP_FOLDER_LABEL, path_problem
from edgebox.repository.initial_state import INITIAL_STATE_FOLDER_LABEL
from edgebox.repository.names import model_name_problem
from edgebox.repository.result_publishing import publishing_problems

_FORMATS_WITH_3_DIMS = (
    model_config_pb2.ModelInput.FORMAT_NHWC,
    model_config_pb2.ModelInput.FORMAT_NCHW,
)

Problem = tuple[str, str]


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
        problems += _check_ensemble(config)
    elif config.HasField("ensemble_scheduling"):
        problems.append(("ensemble_scheduling", 'ensemble_scheduling needs platform: "ensemble"'))
    if config.HasField("sequence_batching"):
        problems += _check_sequence_batching(config)
    problems += _check_named_paths(config)
    problems += _check_passthrough(config)
    problems += [("parameters", problem) for problem in publishing_problems(config)]
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
    if config.platform == "tensorrt_plan" or config.backend == "tensorrt":
        for name in config.model_operations.op_library_filename:
            problem = path_problem("op_library_filename", name)
            if problem is not None:
                yield "model_operations.op_library_filename", problem
        if TENSORRT_PLUGINS_PARAMETER in config.parameters:
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


_Control = model_config_pb2.ModelSequenceBatching.Control
_FLAG_KINDS = (
    _Control.CONTROL_SEQUENCE_START,
    _Control.CONTROL_SEQUENCE_READY,
    _Control.CONTROL_SEQUENCE_END,
)
_FALSE_TRUE_FIELDS = ("int32_false_true", "fp32_false_true", "bool_false_true")
_CORRID_TYPES = (
    model_config_pb2.TYPE_UINT64,
    model_config_pb2.TYPE_INT64,
    model_config_pb2.TYPE_UINT32,
    model_config_pb2.TYPE_INT32,
    model_config_pb2.TYPE_STRING,
)


def _check_sequence_batching(config) -> list[Problem]:
    """``sequence_batching`` as Triton 2.51 validates it (``model_config_utils.cc``
    and the sequence batcher's initial-state checks, in their words), plus
    what edgebox needs to run it unambiguously: one control per control
    tensor, control and state inputs that are not also client inputs, and
    initial-state files inside ``<model>/initial_state``. Dynamic and sequence
    batching together never reach here: they are one protobuf ``oneof``, so
    the parser refuses them as Triton's does."""
    where = "sequence_batching"
    batching = config.sequence_batching
    problems: list[Problem] = []
    if config.platform == "ensemble":
        problems.append(
            (
                where,
                "an ensemble cannot have sequence_batching: edgebox does not run sequence "
                "ensembles; its steps' models can have it",
            )
        )
    if config.model_transaction_policy.decoupled:
        problems.append(
            (
                where,
                "sequence_batching with a decoupled model_transaction_policy: "
                "edgebox does not support it yet",
            )
        )
    if config.response_cache.enable:
        problems.append(
            (
                "response_cache",
                f"Response Cache does not currently support model '{config.name}' with "
                "sequence batching scheduler. Please disable the response cache.",
            )
        )
    input_names = {tensor.name for tensor in config.input}
    problems += _check_controls(batching.control_input, input_names)
    control_names = {control_input.name for control_input in batching.control_input}
    problems += _check_strategy(batching, config.max_batch_size)
    problems += _check_states(batching.state, input_names, control_names)
    return problems


def _check_controls(control_inputs, input_names: set[str]) -> Iterator[Problem]:
    seen_names: set[str] = set()
    seen_kinds: set[int] = set()
    for index, control_input in enumerate(control_inputs):
        where = f"sequence_batching.control_input[{index}]"
        name = control_input.name
        if not name:
            yield where, f"sequence batching control tensor #{index} must have a name"
        elif name in seen_names:
            yield (
                f"{where}.name",
                f"sequence batching control tensor '{name}' is specified for multiple "
                "control kinds",
            )
        elif name in input_names:
            yield (
                f"{where}.name",
                f"sequence batching control tensor '{name}' is also listed in 'input'; "
                "the sequence batcher supplies it, so it must not be",
            )
        seen_names.add(name)
        label = f"sequence batching control tensor '{name or f'#{index}'}'"
        if len(control_input.control) != 1:
            yield (
                f"{where}.control" if control_input.control else where,
                f"{label} must have exactly one control, got {len(control_input.control)}",
            )
            continue
        control = control_input.control[0]
        control_where = f"{where}.control[0]"
        if control.kind not in _Control.Kind.values():
            yield (
                f"{control_where}.kind",
                f"{label}: unknown control kind {control.kind}, expected "
                "CONTROL_SEQUENCE_START, CONTROL_SEQUENCE_READY, CONTROL_SEQUENCE_END "
                "or CONTROL_SEQUENCE_CORRID",
            )
            continue
        kind = _Control.Kind.Name(control.kind)
        if control.kind in seen_kinds:
            yield (
                f"{control_where}.kind",
                f"sequence batching specifies multiple {kind} tensors",
            )
            continue
        seen_kinds.add(control.kind)
        lists = [field for field in _FALSE_TRUE_FIELDS if getattr(control, field)]
        if control.kind in _FLAG_KINDS:
            if not lists:
                yield (
                    control_where,
                    "sequence batching must specify either 'int32_false_true', "
                    f"'fp32_false_true' or 'bool_false_true' for {kind}",
                )
            elif len(lists) > 1:
                yield (
                    control_where,
                    "sequence batching specifies more than one from 'int32_false_true', "
                    f"'fp32_false_true' and 'bool_false_true' for {kind}",
                )
            elif len(getattr(control, lists[0])) != 2:
                yield (
                    f"{control_where}.{lists[0]}",
                    f"sequence batching control '{lists[0]}' must have exactly 2 entries "
                    f"for {kind}",
                )
            continue
        if lists:
            yield (
                control_where,
                "sequence batching must not specify either 'int32_false_true', "
                f"'fp32_false_true' or 'bool_false_true' for {kind}",
            )
        elif control.data_type not in _CORRID_TYPES:
            type_name = model_config_pb2.DataType.Name(control.data_type)
            yield (
                f"{control_where}.data_type",
                f"unexpected data type {type_name} for control {kind}. Allowed data types "
                "are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
            )


MAX_SEQUENCE_SLOTS = 4096
"""Sequence slots per instance (``direct``: max_batch_size; ``oldest``:
max_candidate_sequences): the scheduler keeps a table of them, so a config
asking for 2**31 must be refused, not allocated."""


def _check_strategy(batching, max_batch_size: int) -> Iterator[Problem]:
    if batching.HasField("oldest"):
        field = "sequence_batching.oldest.max_candidate_sequences"
        slots = batching.oldest.max_candidate_sequences or max_batch_size
    else:
        field, slots = "max_batch_size", max_batch_size
    if slots > MAX_SEQUENCE_SLOTS:
        yield (
            field,
            f"sequence batching keeps {slots} sequence slots per instance, more than the "
            f"{MAX_SEQUENCE_SLOTS} edgebox allows",
        )
    if batching.HasField("oldest"):
        oldest = batching.oldest
        where = "sequence_batching.oldest"
        if oldest.max_candidate_sequences < 0:
            yield (
                f"{where}.max_candidate_sequences",
                "sequence batching oldest: max_candidate_sequences must be >= 0 "
                f"(0: max_batch_size), got {oldest.max_candidate_sequences}",
            )
        for size in oldest.preferred_batch_size:
            if size <= 0:
                yield (
                    f"{where}.preferred_batch_size",
                    f"sequence batching preferred batch size must be positive, got {size}",
                )
            elif size > max_batch_size:
                yield (
                    f"{where}.preferred_batch_size",
                    "sequence batching preferred batch size must be <= max batch size "
                    f"{max_batch_size}, got {size}",
                )
    if batching.HasField("direct"):
        utilization = batching.direct.minimum_slot_utilization
        # Written so that NaN is refused too; Triton's message says (0.0, 1.0]
        # but its check lets 0.0 through, as this one does.
        if not 0.0 <= utilization <= 1.0:
            yield (
                "sequence_batching.direct.minimum_slot_utilization",
                "sequence batching minimum slot utilization must be in range [0.0, 1.0], "
                f"got {utilization:g}",
            )


def _check_states(states, input_names: set[str], control_names: set[str]) -> Iterator[Problem]:
    seen_inputs: set[str] = set()
    seen_outputs: set[str] = set()
    for index, state in enumerate(states):
        where = f"sequence_batching.state[{index}]"
        name = state.input_name
        if not name:
            yield where, f"sequence batching state #{index} must have an input_name"
        elif name in seen_inputs:
            yield f"{where}.input_name", f"state input name '{name}' is specified more than once"
        elif name in input_names:
            yield (
                f"{where}.input_name",
                f"state input '{name}' is also listed in 'input'; the sequence batcher "
                "supplies it, so it must not be",
            )
        elif name in control_names:
            yield (
                f"{where}.input_name",
                f"state input '{name}' is also a sequence batching control tensor",
            )
        seen_inputs.add(name)
        if not state.output_name:
            yield where, f"sequence batching state #{index} must have an output_name"
        elif state.output_name in seen_outputs:
            yield (
                f"{where}.output_name",
                f"state output name '{state.output_name}' is specified more than once",
            )
        seen_outputs.add(state.output_name)
        label = f"state '{name or f'#{index}'}'"
        if state.data_type == model_config_pb2.TYPE_INVALID:
            yield where, f"{label}: data_type is not set"
        dims = list(state.dims)
        if not dims:
            yield f"{where}.dims", f"{label}: dims must list at least one dimension"
        elif any(d < 1 and d != -1 for d in dims):
            yield f"{where}.dims", f"{label}: each dim must be >= 1 or -1 (variable), got {dims}"
        if len(state.initial_state) > 1:
            yield (
                f"{where}.initial_state",
                f"initial_state field for state input '{name}' must contain exactly one or "
                f"zero element. Found '{len(state.initial_state)}' elements.",
            )
        elif state.initial_state:
            yield from _check_initial_state(state, f"{where}.initial_state[0]", label)


def _check_initial_state(state, where: str, label: str) -> Iterator[Problem]:
    initial = state.initial_state[0]
    name = state.input_name
    if not initial.name:
        yield (
            where,
            f"Field 'name' must be set when using initial_state for state input '{name}'.",
        )
    source = initial.WhichOneof("state_data")
    if source is None:
        yield where, f"initial_state for {label} must set one of zero_data or data_file"
    elif source == "data_file":
        problem = path_problem(
            "initial_state data_file", initial.data_file, INITIAL_STATE_FOLDER_LABEL
        )
        if problem is not None:
            yield f"{where}.data_file", f"{label}: {problem}"
    if initial.data_type != state.data_type:
        expected = model_config_pb2.DataType.Name(state.data_type)
        got = model_config_pb2.DataType.Name(initial.data_type)
        yield (
            f"{where}.data_type",
            f"The data type used for 'initial_state' field of state '{name}' does not match "
            f"the state data type: expected {expected}, got {got}",
        )
    dims = list(initial.dims)
    state_dims = list(state.dims)
    if len(dims) != len(state_dims):
        yield (
            f"{where}.dims",
            "Number of dimensions in 'initial_state' doesn't match the size of 'state' "
            f"dimensions for state input '{name}'. {len(dims)} != {len(state_dims)}",
        )
    elif -1 in dims:
        yield (
            f"{where}.dims",
            f"'initial_state' field for state input name '{name}' contains variable dimensions.",
        )
    elif any(d < 1 for d in dims):
        yield f"{where}.dims", f"'initial_state' dims for {label} must each be >= 1, got {dims}"
    else:
        for dim, state_dim in zip(dims, state_dims, strict=True):
            if state_dim != -1 and dim != state_dim:
                yield (
                    f"{where}.dims",
                    f"'initial_state' dim for input name '{name}' doesn't match 'state' dim "
                    f"description. {dim} != {state_dim}",
                )
                break


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


def _check_ensemble(config) -> list[Problem]:
    problems: list[Problem] = []
    if config.instance_group:
        problems.append(
            ("instance_group", "an ensemble cannot have instance_group; its steps' models do")
        )
    if config.HasField("optimization"):
        # Triton 2.51's words (tests/triton_answers.py, PYTHON_OPTIMIZATION).
        problems.append(
            (
                "optimization",
                f"optimization should not be specified for ensemble '{config.name}'; "
                "its steps' models can have it",
            )
        )
    steps = config.ensemble_scheduling.step
    if not steps:
        problems.append(("platform", "ensemble needs ensemble_scheduling with at least one step"))
        return problems
    ensemble_inputs = {t.name for t in config.input}
    producer: dict[str, int] = {}
    for index, step in enumerate(steps):
        where = f"ensemble_scheduling.step[{index}]"
        if not step.model_name:
            problems.append((where, f"ensemble step #{index} has no model_name"))
        elif (name_problem := model_name_problem(step.model_name)) is not None:
            problems.append((f"{where}.model_name", f"ensemble step #{index}: {name_problem}"))
        if not step.input_map:
            problems.append(
                (where, f"ensemble step #{index} ('{step.model_name}') has an empty input_map")
            )
        for tensor in step.output_map.values():
            if tensor in ensemble_inputs:
                problems.append(
                    (
                        where,
                        f"ensemble step '{step.model_name}' writes '{tensor}', "
                        "which is an ensemble input",
                    )
                )
            elif tensor in producer:
                first = steps[producer[tensor]].model_name
                problems.append(
                    (
                        where,
                        f"ensemble tensor '{tensor}' is written by both '{first}' "
                        f"and '{step.model_name}'",
                    )
                )
            else:
                producer[tensor] = index
    consumed: set[str] = set()
    for index, step in enumerate(steps):
        for model_input, tensor in step.input_map.items():
            consumed.add(tensor)
            if tensor not in ensemble_inputs and tensor not in producer:
                problems.append(
                    (
                        f"ensemble_scheduling.step[{index}].input_map",
                        f"ensemble step '{step.model_name}' input '{model_input}' reads "
                        f"'{tensor}', which is neither an ensemble input nor any step's output",
                    )
                )
    for index, tensor in enumerate(config.output):
        if tensor.name not in producer:
            problems.append(
                (
                    f"output[{index}].name",
                    f"ensemble output '{tensor.name}' is not written by any step",
                )
            )
    for index, tensor in enumerate(config.input):
        if tensor.name not in consumed:
            problems.append(
                (f"input[{index}].name", f"ensemble input '{tensor.name}' is not read by any step")
            )
    cycle = _find_cycle(steps, producer)
    if cycle:
        names = " -> ".join(f"'{steps[i].model_name}'" for i in cycle)
        problems.append(("ensemble_scheduling", f"ensemble steps form a cycle: {names}"))
    return problems


def _find_cycle(steps, producer: dict[str, int]) -> list[int] | None:
    edges = {
        index: sorted({producer[t] for t in step.input_map.values() if t in producer})
        for index, step in enumerate(steps)
    }
    state: dict[int, int] = {}
    path: list[int] = []

    def visit(node: int) -> list[int] | None:
        state[node] = 1
        path.append(node)
        for upstream in edges[node]:
            if state.get(upstream) == 1:
                return [*path[path.index(upstream) :], upstream]
            if upstream not in state:
                found = visit(upstream)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _product(values: list[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result
