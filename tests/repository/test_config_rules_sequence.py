"""``sequence_batching`` rules: each config below breaks one rule and pins the
(field path, message) ``check_model_config`` gives for it. Where Triton 2.51
refuses the same config its words are used (probed against the real server,
see ``/work/notes/sequence.md``); edgebox is stricter where a config would
otherwise be silently misread (one control per control tensor, state names
that clash with inputs, initial-state files outside their folder).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from edgebox.errors import ConfigError
from edgebox.repository.config import parse_model_config_file
from edgebox.repository.config_rules import check_model_config

BASE = """
name: "m"
backend: "python"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


def problems(extra: str, base: str = BASE) -> list[tuple[str, str]]:
    text = textwrap.dedent(base) + textwrap.dedent(extra)
    config = text_format.Parse(text, model_config_pb2.ModelConfig())
    return check_model_config(config)


def sequence_problems(block: str, base: str = BASE) -> list[tuple[str, str]]:
    return problems(f"sequence_batching {{\n{textwrap.dedent(block)}\n}}\n", base)


def control(name: str, body: str) -> str:
    return f'control_input [ {{ name: "{name}" control [ {{ {body} }} ] }} ]'


# ------------------------------------------------------------ valid configs


def test_a_direct_config_with_every_control_has_no_problems() -> None:
    assert (
        sequence_problems(
            """
            max_sequence_idle_microseconds: 2000000
            direct { max_queue_delay_microseconds: 100 minimum_slot_utilization: 0.5 }
            control_input [
              { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
              { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
              { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },
              { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
            ]
            """
        )
        == []
    )


def test_an_oldest_config_has_no_problems() -> None:
    assert (
        sequence_problems(
            """
            oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] }
            control_input [
              { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] }
            ]
            """
        )
        == []
    )


def test_oldest_without_max_candidate_sequences_is_valid_as_in_triton() -> None:
    # proto3 cannot tell an unset field from 0; Triton takes 0 as max_batch_size.
    assert sequence_problems("oldest { max_candidate_sequences: 0 }") == []
    assert sequence_problems("oldest { }") == []


def test_states_with_both_initial_state_forms_have_no_problems() -> None:
    assert (
        sequence_problems(
            """
            state [
              {
                input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_INT32 dims: [ -1, 3 ]
                initial_state { name: "zeros" data_type: TYPE_INT32 dims: [ 2, 3 ] zero_data: true }
              },
              {
                input_name: "IN_TEXT" output_name: "OUT_TEXT" data_type: TYPE_STRING dims: [ 2 ]
                initial_state { name: "file" data_type: TYPE_STRING dims: [ 2 ] data_file: "text.bin" }
              },
              { input_name: "IN_PLAIN" output_name: "OUT_PLAIN" data_type: TYPE_FP32 dims: [ 4 ] }
            ]
            """
        )
        == []
    )


def test_an_output_state_may_be_listed_as_an_output_for_clients_to_request() -> None:
    assert (
        sequence_problems(
            'state [ { input_name: "S" output_name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]'
        )
        == []
    )


# ------------------------------------------------------- model-wide rules


def test_dynamic_and_sequence_batching_together_are_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent(BASE).lstrip("\n") + "dynamic_batching { }\nsequence_batching { }\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_model_config_file(path, "m")
    # Triton 2.51 logs the same protobuf message, then "failed to read text proto".
    assert str(info.value) == (
        f'{path}:7:1: Field "sequence_batching" is specified '
        'along with field "dynamic_batching", another member of oneof "scheduling_choice" '
        'for message type "inference.ModelConfig".'
    )


def test_an_ensemble_with_sequence_batching_is_refused() -> None:
    base = BASE.replace('backend: "python"', 'platform: "ensemble"')
    assert (
        "sequence_batching",
        "an ensemble cannot have sequence_batching: edgebox does not run sequence "
        "ensembles; its steps' models can have it",
    ) in sequence_problems("", base)


def test_a_decoupled_sequence_model_is_refused_as_not_supported_yet() -> None:
    assert problems("model_transaction_policy { decoupled: true }\nsequence_batching { }\n") == [
        (
            "sequence_batching",
            "sequence_batching with a decoupled model_transaction_policy: "
            "edgebox does not support it yet",
        )
    ]


def test_response_cache_with_sequence_batching_is_refused_with_tritons_words() -> None:
    assert problems("response_cache { enable: true }\nsequence_batching { }\n") == [
        (
            "response_cache",
            "Response Cache does not currently support model 'm' with sequence batching "
            "scheduler. Please disable the response cache.",
        )
    ]


# ---------------------------------------------------------- control inputs


def test_control_input_without_a_name() -> None:
    block = "control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]"
    assert sequence_problems(block) == [
        (
            "sequence_batching.control_input[0]",
            "sequence batching control tensor #0 must have a name",
        )
    ]


def test_control_input_without_a_control() -> None:
    assert sequence_problems('control_input [ { name: "S" } ]') == [
        (
            "sequence_batching.control_input[0]",
            "sequence batching control tensor 'S' must have exactly one control, got 0",
        )
    ]


def test_control_input_with_two_controls() -> None:
    block = """
    control_input [ { name: "S" control [
      { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] },
      { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }
    ] } ]
    """
    assert sequence_problems(block) == [
        (
            "sequence_batching.control_input[0].control",
            "sequence batching control tensor 'S' must have exactly one control, got 2",
        )
    ]


def test_the_same_control_tensor_name_twice_uses_tritons_words() -> None:
    block = """
    control_input [
      { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
      { name: "S" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }
    ]
    """
    assert sequence_problems(block) == [
        (
            "sequence_batching.control_input[1].name",
            "sequence batching control tensor 'S' is specified for multiple control kinds",
        )
    ]


def test_the_same_control_kind_twice_uses_tritons_words() -> None:
    block = """
    control_input [
      { name: "S1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
      { name: "S2" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
    ]
    """
    assert sequence_problems(block) == [
        (
            "sequence_batching.control_input[1].control[0].kind",
            "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors",
        )
    ]


def test_an_unknown_control_kind_is_refused() -> None:
    assert sequence_problems(control("K", "kind: 7 int32_false_true: [ 0, 1 ]")) == [
        (
            "sequence_batching.control_input[0].control[0].kind",
            "sequence batching control tensor 'K': unknown control kind 7, expected "
            "CONTROL_SEQUENCE_START, CONTROL_SEQUENCE_READY, CONTROL_SEQUENCE_END "
            "or CONTROL_SEQUENCE_CORRID",
        )
    ]


def test_a_control_tensor_that_is_also_a_model_input_is_refused() -> None:
    block = control("INPUT", "kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ]")
    assert sequence_problems(block) == [
        (
            "sequence_batching.control_input[0].name",
            "sequence batching control tensor 'INPUT' is also listed in 'input'; "
            "the sequence batcher supplies it, so it must not be",
        )
    ]


@pytest.mark.parametrize(
    "kind", ["CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END"]
)
def test_a_flag_control_needs_one_false_true_list(kind: str) -> None:
    assert sequence_problems(control("F", f"kind: {kind}")) == [
        (
            "sequence_batching.control_input[0].control[0]",
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' "
            f"or 'bool_false_true' for {kind}",
        )
    ]


def test_a_flag_control_with_two_false_true_lists() -> None:
    body = "kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ]"
    assert sequence_problems(control("F", body)) == [
        (
            "sequence_batching.control_input[0].control[0]",
            "sequence batching specifies more than one from 'int32_false_true', "
            "'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_START",
        )
    ]


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("int32_false_true", "[ 1 ]"),
        ("fp32_false_true", "[ 0, 1, 2 ]"),
        ("bool_false_true", "[ true ]"),
    ],
)
def test_a_false_true_list_needs_exactly_two_values(field: str, values: str) -> None:
    body = f"kind: CONTROL_SEQUENCE_END {field}: {values}"
    assert sequence_problems(control("F", body)) == [
        (
            f"sequence_batching.control_input[0].control[0].{field}",
            f"sequence batching control '{field}' must have exactly 2 entries "
            "for CONTROL_SEQUENCE_END",
        )
    ]


def test_corrid_with_a_datatype_triton_does_not_allow() -> None:
    body = "kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32"
    assert sequence_problems(control("C", body)) == [
        (
            "sequence_batching.control_input[0].control[0].data_type",
            "unexpected data type TYPE_FP32 for control CONTROL_SEQUENCE_CORRID. Allowed data "
            "types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        )
    ]


def test_corrid_without_a_datatype() -> None:
    assert sequence_problems(control("C", "kind: CONTROL_SEQUENCE_CORRID")) == [
        (
            "sequence_batching.control_input[0].control[0].data_type",
            "unexpected data type TYPE_INVALID for control CONTROL_SEQUENCE_CORRID. Allowed data "
            "types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        )
    ]


def test_corrid_with_a_false_true_list() -> None:
    body = "kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ]"
    assert sequence_problems(control("C", body)) == [
        (
            "sequence_batching.control_input[0].control[0]",
            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' "
            "or 'bool_false_true' for CONTROL_SEQUENCE_CORRID",
        )
    ]


# -------------------------------------------------------------- strategies


def test_negative_max_candidate_sequences() -> None:
    assert sequence_problems("oldest { max_candidate_sequences: -2 }") == [
        (
            "sequence_batching.oldest.max_candidate_sequences",
            "sequence batching oldest: max_candidate_sequences must be >= 0 "
            "(0: max_batch_size), got -2",
        )
    ]


def test_preferred_batch_size_not_positive_uses_tritons_words() -> None:
    assert sequence_problems("oldest { preferred_batch_size: [ 2, 0 ] }") == [
        (
            "sequence_batching.oldest.preferred_batch_size",
            "sequence batching preferred batch size must be positive, got 0",
        )
    ]


def test_preferred_batch_size_over_max_batch_size_uses_tritons_words() -> None:
    assert sequence_problems("oldest { preferred_batch_size: [ 8 ] }") == [
        (
            "sequence_batching.oldest.preferred_batch_size",
            "sequence batching preferred batch size must be <= max batch size 4, got 8",
        )
    ]


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_minimum_slot_utilization_outside_zero_to_one(value: str) -> None:
    assert sequence_problems(f"direct {{ minimum_slot_utilization: {value} }}") == [
        (
            "sequence_batching.direct.minimum_slot_utilization",
            f"sequence batching minimum slot utilization must be in range [0.0, 1.0], got {value}",
        )
    ]


# ------------------------------------------------------------------ states


def state(body: str) -> str:
    return f"state [ {{ {body} }} ]"


GOOD_STATE = 'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ 2 ]'


def test_state_without_names() -> None:
    assert sequence_problems(state("data_type: TYPE_INT32 dims: [ 1 ]")) == [
        ("sequence_batching.state[0]", "sequence batching state #0 must have an input_name"),
        ("sequence_batching.state[0]", "sequence batching state #0 must have an output_name"),
    ]


def test_state_names_declared_twice() -> None:
    block = f"state [ {{ {GOOD_STATE} }}, {{ {GOOD_STATE} }} ]"
    assert sequence_problems(block) == [
        (
            "sequence_batching.state[1].input_name",
            "state input name 'IS' is specified more than once",
        ),
        (
            "sequence_batching.state[1].output_name",
            "state output name 'OS' is specified more than once",
        ),
    ]


def test_state_input_that_is_also_a_model_input_is_refused() -> None:
    body = 'input_name: "INPUT" output_name: "OS" data_type: TYPE_INT32 dims: [ 1 ]'
    assert sequence_problems(state(body)) == [
        (
            "sequence_batching.state[0].input_name",
            "state input 'INPUT' is also listed in 'input'; the sequence batcher supplies "
            "it, so it must not be",
        )
    ]


def test_state_input_that_is_also_a_control_tensor_is_refused() -> None:
    block = (
        control("S", "kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ]")
        + "\n"
        + state('input_name: "S" output_name: "OS" data_type: TYPE_INT32 dims: [ 1 ]')
    )
    assert sequence_problems(block) == [
        (
            "sequence_batching.state[0].input_name",
            "state input 'S' is also a sequence batching control tensor",
        )
    ]


def test_state_without_data_type_or_dims() -> None:
    assert sequence_problems(state('input_name: "IS" output_name: "OS"')) == [
        ("sequence_batching.state[0]", "state 'IS': data_type is not set"),
        ("sequence_batching.state[0].dims", "state 'IS': dims must list at least one dimension"),
    ]


def test_state_with_a_zero_dim() -> None:
    body = 'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ 2, 0, -2 ]'
    assert sequence_problems(state(body)) == [
        (
            "sequence_batching.state[0].dims",
            "state 'IS': each dim must be >= 1 or -1 (variable), got [2, 0, -2]",
        )
    ]


def initial(body: str, dims: str = "[ 2 ]") -> str:
    return state(
        f'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: {dims} '
        f"initial_state [ {body} ]"
    )


def test_two_initial_states_use_tritons_words() -> None:
    one = '{ name: "i" data_type: TYPE_INT32 dims: [ 2 ] zero_data: true }'
    assert sequence_problems(initial(f"{one}, {one}")) == [
        (
            "sequence_batching.state[0].initial_state",
            "initial_state field for state input 'IS' must contain exactly one or zero "
            "element. Found '2' elements.",
        )
    ]


def test_initial_state_without_a_name_uses_tritons_words() -> None:
    assert sequence_problems(initial("{ data_type: TYPE_INT32 dims: [ 2 ] zero_data: true }")) == [
        (
            "sequence_batching.state[0].initial_state[0]",
            "Field 'name' must be set when using initial_state for state input 'IS'.",
        )
    ]


def test_initial_state_without_data() -> None:
    assert sequence_problems(initial('{ name: "i" data_type: TYPE_INT32 dims: [ 2 ] }')) == [
        (
            "sequence_batching.state[0].initial_state[0]",
            "initial_state for state 'IS' must set one of zero_data or data_file",
        )
    ]


def test_initial_state_of_another_datatype_uses_tritons_words() -> None:
    body = '{ name: "i" data_type: TYPE_FP32 dims: [ 2 ] zero_data: true }'
    assert sequence_problems(initial(body)) == [
        (
            "sequence_batching.state[0].initial_state[0].data_type",
            "The data type used for 'initial_state' field of state 'IS' does not match the "
            "state data type: expected TYPE_INT32, got TYPE_FP32",
        )
    ]


def test_initial_state_of_another_rank_uses_tritons_words() -> None:
    body = '{ name: "i" data_type: TYPE_INT32 dims: [ 2, 1 ] zero_data: true }'
    assert sequence_problems(initial(body)) == [
        (
            "sequence_batching.state[0].initial_state[0].dims",
            "Number of dimensions in 'initial_state' doesn't match the size of 'state' "
            "dimensions for state input 'IS'. 2 != 1",
        )
    ]


def test_initial_state_with_a_variable_dim_uses_tritons_words() -> None:
    body = '{ name: "i" data_type: TYPE_INT32 dims: [ -1 ] zero_data: true }'
    assert sequence_problems(initial(body, dims="[ -1 ]")) == [
        (
            "sequence_batching.state[0].initial_state[0].dims",
            "'initial_state' field for state input name 'IS' contains variable dimensions.",
        )
    ]


def test_initial_state_with_a_zero_dim() -> None:
    body = '{ name: "i" data_type: TYPE_INT32 dims: [ 0 ] zero_data: true }'
    assert sequence_problems(initial(body, dims="[ -1 ]")) == [
        (
            "sequence_batching.state[0].initial_state[0].dims",
            "'initial_state' dims for state 'IS' must each be >= 1, got [0]",
        )
    ]


def test_initial_state_dim_unlike_the_states_uses_tritons_words() -> None:
    body = '{ name: "i" data_type: TYPE_INT32 dims: [ 3 ] zero_data: true }'
    assert sequence_problems(initial(body)) == [
        (
            "sequence_batching.state[0].initial_state[0].dims",
            "'initial_state' dim for input name 'IS' doesn't match 'state' dim description. 3 != 2",
        )
    ]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../config.pbtxt", "is outside the model's initial_state folder"),
        ("/etc/passwd", "is outside the model's initial_state folder"),
        ("", "names the model's initial_state folder itself, not a file in it"),
    ],
)
def test_initial_state_data_file_outside_its_folder(name: str, why: str) -> None:
    body = f'{{ name: "i" data_type: TYPE_INT32 dims: [ 2 ] data_file: "{name}" }}'
    assert sequence_problems(initial(body)) == [
        (
            "sequence_batching.state[0].initial_state[0].data_file",
            f"state 'IS': initial_state data_file '{name}' {why}",
        )
    ]


# ---------------------------------------------------- through the real path


def test_a_sequence_rule_is_located_at_its_line_in_config_pbtxt(tmp_path: Path) -> None:
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent(BASE).lstrip("\n")
        + textwrap.dedent(
            """\
            sequence_batching {
              control_input [
                { name: "C"
                  control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] }
              ]
            }
            """
        )
    )
    _, found = parse_model_config_file(path, "m")
    assert [str(p) for p in found] == [
        f"{path}:9:49: unexpected data type TYPE_FP32 for control CONTROL_SEQUENCE_CORRID. "
        "Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
    ]


def test_more_sequence_slots_than_edgebox_keeps_are_refused_not_allocated() -> None:
    huge = BASE.replace("max_batch_size: 4", "max_batch_size: 2147483647")
    assert sequence_problems("direct { }", huge) == [
        (
            "max_batch_size",
            "sequence batching keeps 2147483647 sequence slots per instance, more than the "
            "4096 edgebox allows",
        )
    ]
    assert sequence_problems("oldest { max_candidate_sequences: 5000 }") == [
        (
            "sequence_batching.oldest.max_candidate_sequences",
            "sequence batching keeps 5000 sequence slots per instance, more than the "
            "4096 edgebox allows",
        )
    ]
    assert sequence_problems("oldest { max_candidate_sequences: 4096 }") == []
