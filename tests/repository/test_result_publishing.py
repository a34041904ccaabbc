"""A model opts in to publishing its results in its own config; a typo fails
the load instead of silently publishing nothing."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from edgebox.repository.config import ModelConfig
from edgebox.repository.result_publishing import (
    ResultPublishing,
    publishing_problems,
    result_publishing,
)


def config(parameters: dict[str, str]) -> ModelConfig:
    text = " ".join(
        f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}'
        for k, v in parameters.items()
    )
    return text_format.Parse(text, ModelConfig())


def test_publishing_is_off_unless_the_config_asks():
    assert result_publishing(config({})) == ResultPublishing(publish=False, full_outputs=False)
    assert result_publishing(config({"mqtt_publish": "True", "mqtt_outputs": "full"})) == (
        ResultPublishing(publish=True, full_outputs=True)
    )


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        (
            {"mqtt_publish": "yes please"},
            "parameter 'mqtt_publish': expected true or false, got 'yes please'",
        ),
        ({"mqtt_outputs": "all"}, "parameter 'mqtt_outputs': expected summary or full, got 'all'"),
        (
            {"result_summary": "lane"},
            "parameter 'result_summary': unknown rule 'lane' (expected one of lanes, tensors)",
        ),
    ],
)
def test_a_bad_value_is_named(parameters, problem):
    assert publishing_problems(config(parameters)) == [problem]
