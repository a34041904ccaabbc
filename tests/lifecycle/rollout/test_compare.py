"""The comparison rules: tensors within tolerances, lanes in pixels, and a
model's own rule from its folder."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.lifecycle.rollout.compare import compare_lanes, compare_tensors, comparer_for
from edgebox.repository.rollout_policy import RolloutPolicy


def _answer(offset: float = 0.0) -> dict[str, np.ndarray]:
    return {"OUTPUT0": np.arange(16, dtype=np.float32) + offset}


def test_tensors_within_tolerance_agree_and_outside_say_by_how_much():
    assert compare_tensors(_answer(), _answer(5e-6), rtol=0, atol=1e-5).agree
    verdict = compare_tensors(_answer(), _answer(32.0), rtol=1e-3, atol=1e-5)
    assert verdict == (False, "OUTPUT0 max |diff| 32.0 > atol 1e-05")


def test_tensors_of_another_shape_or_missing_disagree():
    assert compare_tensors(_answer(), {"OUTPUT0": np.zeros(8)}, 0, 0).detail == (
        "OUTPUT0 shape [8] != [16]"
    )
    assert "missing" in compare_tensors(_answer(), {}, 0, 0).detail


def test_bytes_and_nan_are_compared_exactly():
    text = {"T": np.array([b"a", b"b"], dtype=object)}
    assert compare_tensors(text, {"T": np.array([b"a", b"b"], dtype=object)}, 0, 0).agree
    assert not compare_tensors(text, {"T": np.array([b"a", b"c"], dtype=object)}, 0, 0).agree
    nan = {"X": np.array([np.nan, 1.0])}
    assert compare_tensors(nan, {"X": np.array([np.nan, 1.0])}, 0, 0).agree
    verdict = compare_tensors({"X": np.array([0.0, 1.0])}, nan, 0, 0)
    assert not verdict.agree and "NaN" in verdict.detail


def _lanes(shift_px: float = 0.0, lanes: int = 2) -> dict[str, np.ndarray]:
    """Straight lanes 200 px apart, 10 points each, shifted sideways."""
    ys = np.linspace(200, 360, 10)
    points = np.concatenate(
        [np.stack([np.full(10, 100.0 + 200 * i + shift_px), ys], axis=1) for i in range(lanes)]
    )
    return {
        "lane_scores": np.full(lanes, 0.9, dtype=np.float32),
        "lane_points": points.astype(np.float32),
        "lane_point_counts": np.full(lanes, 10, dtype=np.int32),
    }


def test_lanes_shifted_by_30_px_disagree_and_by_half_a_pixel_agree():
    assert compare_lanes(_lanes(), _lanes(0.5), max_px=2.0).agree
    verdict = compare_lanes(_lanes(), _lanes(30.0), max_px=2.0)
    assert verdict == (False, "lanes: mean point distance 30.0 px > max_px 2.0")


def test_lanes_of_another_count_disagree():
    verdict = compare_lanes(_lanes(lanes=3), _lanes(lanes=2), max_px=2.0)
    assert verdict == (False, "lanes: 2 lanes, the serving version sees 3")


def test_lanes_rule_says_which_outputs_it_needs():
    verdict = compare_lanes(_answer(), _answer(), max_px=2.0)
    assert not verdict.agree and "lane_scores" in verdict.detail


def test_a_models_own_rule_comes_from_its_folder(tmp_path):
    (tmp_path / "rollout_compare.py").write_text(
        "def compare(baseline, candidate):\n"
        "    gap = abs(float(baseline['OUTPUT0'].sum() - candidate['OUTPUT0'].sum()))\n"
        "    return gap < 1, f'sums differ by {gap}'\n"
    )
    compare = comparer_for(RolloutPolicy(compare="custom"), tmp_path)
    assert compare(_answer(), _answer(0.01)).agree
    assert compare(_answer(), _answer(1.0)) == (False, "sums differ by 16.0")


def test_a_models_own_rule_that_raises_counts_as_disagreement(tmp_path):
    (tmp_path / "rollout_compare.py").write_text("def compare(b, c):\n    return 1 / 0\n")
    verdict = comparer_for(RolloutPolicy(compare="custom"), tmp_path)(_answer(), _answer())
    assert verdict == (False, "rollout_compare.py raised ZeroDivisionError: division by zero")


def test_a_models_own_rule_must_exist_and_stay_in_the_folder(tmp_path):
    with pytest.raises(EdgeboxError, match="failed to import"):
        comparer_for(RolloutPolicy(compare="custom"), tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("def compare(b, c):\n    return True\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "rollout_compare.py").symlink_to(outside)
    with pytest.raises(InvalidArgument, match="outside the model folder"):
        comparer_for(RolloutPolicy(compare="custom"), model)


def test_a_models_own_rule_may_read_the_configs_tolerances(tmp_path):
    (tmp_path / "rollout_compare.py").write_text(
        "def compare(baseline, candidate, policy):\n"
        "    return bool(abs(candidate['OUTPUT0'] - baseline['OUTPUT0']).max() <= policy.max_px)\n"
    )
    compare = comparer_for(RolloutPolicy(compare="custom", max_px=3.0), tmp_path)
    assert compare(_answer(), _answer(2.5)).agree
    assert not compare(_answer(), _answer(3.5)).agree
