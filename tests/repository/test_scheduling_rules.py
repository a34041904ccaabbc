"""Priority levels and rate limiter resources in ``config.pbtxt``: a default
level or queue policy outside ``1..priority_levels`` and a nameless resource
are config errors at their line, worded as Triton 2.51 words them (asked of a
real one: ``default priority level must be in range [1, 2] for prio``)."""

from __future__ import annotations

from pathlib import Path

from repository.test_config_errors import problems_of

HEAD = """
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def test_a_default_level_outside_the_levels_is_located(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        HEAD + "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 3\n}\n",
    )
    assert problems == [f"{path}:7:3: default priority level must be in range [1, 2] for m"]


def test_levels_without_a_default_level_are_refused(tmp_path: Path) -> None:
    _, problems = problems_of(tmp_path, HEAD + "dynamic_batching { priority_levels: 2 }\n")
    assert problems and "default priority level must be in range [1, 2]" in problems[0]


def test_a_queue_policy_for_a_level_that_does_not_exist_is_located(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        HEAD
        + "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 1\n"
        + "  priority_queue_policy { key: 4 value: { max_queue_size: 2 } }\n}\n",
    )
    assert problems == [
        f"{path}:8:3: priority queue policy must have priority level in range [1, 2] for m"
    ]


def test_queue_settings_without_levels_are_left_alone(tmp_path: Path) -> None:
    _, problems = problems_of(tmp_path, HEAD + "dynamic_batching { default_priority_level: 7 }\n")
    assert problems == []


def test_a_nameless_rate_limiter_resource_is_located(tmp_path: Path) -> None:
    path, problems = problems_of(
        tmp_path,
        HEAD
        + "instance_group [ {\n  kind: KIND_CPU\n"
        + '  rate_limiter { resources [ { name: "R1" count: 1 }, { name: " " count: 2 } ] }\n'
        + "} ]\n",
    )
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:7:55:")
    assert problems[0].endswith("rate_limiter resource needs a name")
