"""``version_policy`` selects the versions to serve: latest N (default 1), all,
or specific ones. Spec:
https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#version-policy
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from edgebox.repository.config import read_model_config
from edgebox.repository.version_policy import missing_specific_versions, select_versions


def policy(text: str) -> model_config_pb2.ModelVersionPolicy:
    return text_format.Parse(text, model_config_pb2.ModelVersionPolicy())


def test_no_policy_serves_the_latest_version() -> None:
    assert select_versions(policy(""), [1, 3, 2]) == [3]


def test_latest_one_picks_the_highest_number_not_the_newest_folder() -> None:
    assert select_versions(policy("latest { num_versions: 1 }"), [9, 10, 2]) == [10]


def test_latest_n_serves_the_n_highest_highest_first() -> None:
    assert select_versions(policy("latest { num_versions: 2 }"), [1, 4, 2, 3]) == [4, 3]


def test_latest_n_with_fewer_versions_serves_them_all() -> None:
    assert select_versions(policy("latest { num_versions: 5 }"), [2, 1]) == [2, 1]


def test_all_serves_every_version() -> None:
    assert select_versions(policy("all { }"), [1, 3, 2, 3]) == [3, 2, 1]


def test_specific_serves_the_listed_versions_present() -> None:
    chosen = policy("specific { versions: [ 1, 3, 7 ] }")
    assert select_versions(chosen, [1, 2, 3]) == [3, 1]
    assert missing_specific_versions(chosen, [1, 2, 3]) == [7]


def test_specific_with_every_version_present_misses_none() -> None:
    chosen = policy("specific { versions: [ 2, 2, 1 ] }")
    assert select_versions(chosen, [1, 2]) == [2, 1]
    assert missing_specific_versions(chosen, [1, 2]) == []


@pytest.mark.parametrize("text", ["", "latest { num_versions: 1 }", "all { }"])
def test_only_specific_can_miss_versions(text: str) -> None:
    assert missing_specific_versions(policy(text), []) == []


@pytest.mark.parametrize(
    "text", ["", "latest { num_versions: 3 }", "all { }", "specific { versions: 1 }"]
)
def test_no_version_folder_selects_nothing(text: str) -> None:
    assert select_versions(policy(text), []) == []


def test_policy_from_a_config_file(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nversion_policy: { specific: { versions: [ 1, 3 ] } }\n'
    )
    config = read_model_config(model)
    assert select_versions(config.version_policy, [1, 2]) == [1]
    assert missing_specific_versions(config.version_policy, [1, 2]) == [3]
