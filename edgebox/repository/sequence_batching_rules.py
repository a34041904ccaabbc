"""``sequence_batching`` as Triton 2.51 validates it, in its words: control
inputs, the scheduling strategy (``direct`` or ``oldest``) and implicit state
with its ``initial_state``.

Pure functions over the parsed config, like the other rules
(``config_rules.py``): each problem is a (field path, message) pair.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#sequence-batcher
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2

from edgebox.repository.config_locator import Problem
from edgebox.repository.contained_path import path_problem
from edgebox.repository.initial_state import INITIAL_STATE_FOLDER_LABEL

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


def check_sequence_batching(config) -> list[Problem]:
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
        problem = _supplied_name(_CONTROL_NAME, where, index, name, seen_names, input_names)
        if problem is not None:
            yield problem
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
        problem = _supplied_name(_STATE_NAME, where, index, name, seen_inputs, input_names)
        if problem is None and name in control_names:
            problem = (
                f"{where}.input_name",
                f"state input '{name}' is also a sequence batching control tensor",
            )
        if problem is not None:
            yield problem
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


@dataclass(frozen=True)
class _NameWords:
    """How the name rule of one kind of supplied tensor is worded: Triton's
    words for a missing and a repeated name."""

    field: str
    kind: str
    unnamed: str
    repeated: str


_CONTROL_NAME = _NameWords(
    "name",
    "sequence batching control tensor",
    "sequence batching control tensor #{index} must have a name",
    "sequence batching control tensor '{name}' is specified for multiple control kinds",
)
_STATE_NAME = _NameWords(
    "input_name",
    "state input",
    "sequence batching state #{index} must have an input_name",
    "state input name '{name}' is specified more than once",
)


def _supplied_name(
    words: _NameWords, where: str, index: int, name: str, seen: set[str], input_names: set[str]
) -> Problem | None:
    """The rule for the name of a tensor the sequence batcher supplies, a
    control or a state input: it is set, used once, and no client input, which
    would leave two values for one tensor. Adds ``name`` to ``seen``."""
    first = name not in seen
    seen.add(name)
    if not name:
        return where, words.unnamed.format(index=index)
    if not first:
        return f"{where}.{words.field}", words.repeated.format(name=name)
    if name in input_names:
        return (
            f"{where}.{words.field}",
            f"{words.kind} '{name}' is also listed in 'input'; the sequence batcher supplies "
            "it, so it must not be",
        )
    return None


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
