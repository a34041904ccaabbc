"""Summary rules: what a stream or model result carries instead of tensors,
chosen by the model's own config."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from edgebox.repository.config import ModelConfig
from edgebox.summaries import SummaryError, rule_of, rule_problem, summarize
from edgebox.summaries.lanes import decode_lanes
from edgebox.tensors import Tensor


def test_small_outputs_are_given_whole_and_large_ones_by_shape():
    summary = summarize(
        [
            Tensor("score", "FP32", np.array([0.1, np.nan], dtype=np.float32)),
            Tensor("label", "BYTES", np.array([b"car"], dtype=object)),
            Tensor("count", "INT64", np.array(3, dtype=np.int64)),
            Tensor("heatmap", "FP32", np.zeros((1, 90, 160), dtype=np.float32)),
        ]
    )
    assert summary == {
        "score": [0.1, None],
        "label": ["car"],
        "count": 3,
        "heatmap": {"datatype": "FP32", "shape": [1, 90, 160]},
    }


def test_lanes_are_split_by_their_point_counts():
    lanes = decode_lanes(
        np.array([0.91234567, 0.5], dtype=np.float32),
        np.array([[1.04, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32),
        np.array([1, 2], dtype=np.int32),
    )
    assert lanes == [
        {"score": 0.9123, "points": [[1.0, 2.0]]},
        {"score": 0.5, "points": [[3.0, 4.0], [5.0, 6.0]]},
    ]
    empty = decode_lanes(
        np.zeros(0, np.float32), np.zeros((0, 2), np.float32), np.zeros(0, np.int32)
    )
    assert empty == []


@pytest.mark.parametrize(
    ("scores", "points", "counts", "message"),
    [
        (
            [0.9],
            [[1, 2], [3, 4]],
            [3],
            "'lane_point_counts' adds up to 3 points but 'lane_points' has 2",
        ),
        ([0.9, 0.8], [[1, 2]], [1], "'lane_scores' has 2 lanes but 'lane_point_counts' has 1"),
        ([0.9], [1, 2, 3], [1], "'lane_points' must be [M, 2], got shape [3]"),
    ],
)
def test_contradictory_lane_outputs_are_refused(scores, points, counts, message):
    with pytest.raises(SummaryError) as info:
        decode_lanes(
            np.array(scores, np.float32), np.array(points, np.float32), np.array(counts, np.int32)
        )
    assert str(info.value) == message


LANE_TENSORS = [
    Tensor("lane_scores", "FP32", np.array([0.5], dtype=np.float32)),
    Tensor("lane_points", "FP32", np.array([[1.0, 2.0]], dtype=np.float32)),
    Tensor("lane_point_counts", "INT32", np.array([1], dtype=np.int32)),
]


def config(text: str) -> ModelConfig:
    return text_format.Parse(text, ModelConfig())


def test_the_rule_a_config_names_decodes_lanes():
    named = config('parameters { key: "result_summary" value { string_value: "lanes" } }')
    assert rule_of(named) == "lanes"
    assert summarize(LANE_TENSORS, rule_of(named)) == {
        "lanes": [{"score": 0.5, "points": [[1.0, 2.0]]}]
    }


def test_without_a_rule_lane_outputs_stay_tensors():
    assert rule_of(config("")) == "tensors"
    assert summarize(LANE_TENSORS, rule_of(config(""))) == {
        "lane_scores": [0.5],
        "lane_points": [[1.0, 2.0]],
        "lane_point_counts": [1],
    }


def test_an_unknown_rule_is_named_with_the_known_ones():
    named = config('parameters { key: "result_summary" value { string_value: "boxes" } }')
    assert rule_problem(named) == (
        "parameter 'result_summary': unknown rule 'boxes' (expected one of lanes, tensors)"
    )
    assert rule_problem(config("")) is None


def test_the_lanes_rule_names_the_outputs_it_misses():
    with pytest.raises(SummaryError) as info:
        summarize(LANE_TENSORS[:1], "lanes")
    assert str(info.value) == (
        "the 'lanes' rule needs outputs lane_scores, lane_points, lane_point_counts; "
        "missing lane_points, lane_point_counts"
    )
