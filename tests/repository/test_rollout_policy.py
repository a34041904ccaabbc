"""A model's ``rollout*`` parameters: laid over the device's default field by
field, and refused with the config file's line when they cannot be used."""

from __future__ import annotations

import textwrap

import pytest
from google.protobuf import text_format

from edgebox.repository.config import ModelConfig, parse_model_config_file
from edgebox.repository.rollout_policy import RolloutPolicy, policy_from_mapping, policy_of

HEAD = """
name: "m"
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def _config(parameters: dict[str, str], extra: str = "") -> ModelConfig:
    text = (
        HEAD
        + extra
        + "".join(
            f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
            for k, v in parameters.items()
        )
    )
    return text_format.Parse(text, ModelConfig())


def test_the_configs_parameters_override_the_device_default_field_by_field():
    default = RolloutPolicy(policy="shadow", samples=20, rtol=0.5)
    policy = policy_of(_config({"rollout": "canary", "rollout_samples": "7"}), default)
    assert (policy.policy, policy.samples, policy.rtol) == ("canary", 7, 0.5)
    assert policy_of(_config({}), default) == default


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        ({"rollout": "blue-green"}, "parameters 'rollout': expected one of immediate, shadow"),
        ({"rollout_samples": "many"}, "parameters 'rollout_samples': expected an integer"),
        ({"rollout_min_agreement": "2"}, "parameters 'rollout_min_agreement': expected 0..1"),
        ({"rollout_sample": "5"}, "parameters 'rollout_sample': not a rollout parameter"),
        ({"rollout_compare": "pixels"}, "expected tensors, lanes or custom"),
    ],
)
def test_a_bad_value_is_named(parameters, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        policy_of(_config(parameters), RolloutPolicy())


def test_a_bad_rollout_parameter_is_reported_with_the_files_line(tmp_path):
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent(HEAD).lstrip()
        + 'parameters { key: "rollout" value { string_value: "canary" } }\n'
        + 'parameters { key: "rollout_canary_percent" value { string_value: "150" } }\n'
    )
    _, problems = parse_model_config_file(path, "m")
    assert [str(p) for p in problems] == [
        f"{path}:5:1: parameters 'rollout_canary_percent': expected more than 0, "
        "at most 100, got 150.0"
    ]


def test_shadow_is_refused_for_a_model_whose_requests_carry_state(tmp_path):
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent(HEAD).lstrip()
        + "max_batch_size: 4\nsequence_batching { }\n"
        + 'parameters { key: "rollout" value { string_value: "shadow" } }\n'
    )
    _, problems = parse_model_config_file(path, "m")
    assert "parameters 'rollout': shadow needs a model without sequence_batching" in str(
        problems[0]
    )


def test_a_mapping_is_laid_over_the_given_default_field_by_field():
    default = RolloutPolicy(policy="canary", rtol=0.5)
    policy = policy_from_mapping({"policy": "shadow", "samples": 30, "watch_s": 60}, default)
    assert (policy.policy, policy.samples, policy.watch_s, policy.rtol) == (
        "shadow",
        30,
        60.0,
        0.5,
    )
    assert isinstance(policy.watch_s, float)
    assert policy_from_mapping({}) == RolloutPolicy()


@pytest.mark.parametrize(
    ("mapping", "problem"),
    [
        ({"sampels": 30}, "rollout: unknown field 'sampels'; did you mean 'samples'?"),
        ({"command": "rm"}, "rollout: unknown field 'command' (expected policy, samples"),
        ({"policy": "blue-green"}, "rollout.policy: expected one of immediate, shadow, canary"),
        ({"policy": 1}, "rollout.policy: expected text, got 1"),
        ({"samples": "30"}, "rollout.samples: expected an integer, got '30'"),
        ({"samples": 2.5}, "rollout.samples: expected an integer, got 2.5"),
        ({"samples": True}, "rollout.samples: expected an integer, got True"),
        ({"samples": 0}, "rollout.samples: expected 1..100000, got 0"),
        ({"rtol": None}, "rollout.rtol: expected a number, got None"),
        ({"watch_s": float("inf")}, "rollout.watch_s: expected a finite number, got inf"),
        ({"min_agreement": 2}, "rollout.min_agreement: expected 0..1, got 2.0"),
    ],
)
def test_a_bad_mapping_is_refused_naming_the_field(mapping, problem):
    with pytest.raises(ValueError) as info:
        policy_from_mapping(mapping)
    assert str(info.value).startswith(problem)


def test_a_mapping_that_is_not_one_is_refused():
    with pytest.raises(
        ValueError, match=r"rollout: expected a mapping of policy fields, got \['shadow'\]"
    ):
        policy_from_mapping(["shadow"])
