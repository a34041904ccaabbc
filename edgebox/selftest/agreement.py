"""Does an engine's answer agree with ONNX Runtime's? Judged on lanes, with
the raw difference shown beside them.

Lanes decide: the same number of lanes, and their points within the
detector's ``rollout_max_px`` on average (``compare_lanes``, the rule a new
detector version meets in a rollout), after both answers went through the
pipeline's post-processing. The largest raw difference is reported but not
judged: an FP16 engine moves anchors near the lane threshold, whose x values
mean nothing, by tens of pixels without changing a lane. A value that is
NaN or infinite where ONNX Runtime's is finite is FP16 overflowing; it is
counted, and it makes an otherwise agreeing answer a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgebox.lifecycle.rollout.compare import compare_lanes
from edgebox.selftest.loaded_model import Arrays


@dataclass(frozen=True)
class Agreement:
    lanes_agree: bool
    lanes: int
    reference_lanes: int
    detail: str = ""
    """Why they disagree; "" when they agree."""
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    """Per output, over the values finite in both answers."""
    non_finite: int = 0
    """Values NaN or infinite in the engine's answer but finite in ONNX Runtime's."""

    @property
    def worst_diff(self) -> float:
        return max(self.max_abs_diff.values(), default=0.0)


def agreement(
    reference: Arrays,
    answer: Arrays,
    reference_lanes: Arrays,
    answer_lanes: Arrays,
    max_px: float,
) -> Agreement:
    reference_count = _lane_count(reference_lanes)
    count = _lane_count(answer_lanes)
    problem = shape_problem(reference, answer)
    if problem:
        return Agreement(False, count, reference_count, problem)
    diffs: dict[str, float] = {}
    non_finite = 0
    for name, expected in reference.items():
        got = answer[name]
        wanted = expected.astype(np.float64)
        actual = got.astype(np.float64)
        both = np.isfinite(wanted) & np.isfinite(actual)
        non_finite += int(np.count_nonzero(np.isfinite(wanted) & ~np.isfinite(actual)))
        diffs[name] = float(np.abs(actual - wanted)[both].max()) if both.any() else 0.0
    verdict = compare_lanes(reference_lanes, answer_lanes, max_px)
    detail = ""
    if count != reference_count:
        detail = f"{count} lanes, ONNX Runtime sees {reference_count}"
    elif not verdict.agree:
        detail = verdict.detail
    return Agreement(
        verdict.agree and count == reference_count,
        count,
        reference_count,
        detail,
        diffs,
        non_finite,
    )


def shape_problem(reference: Arrays, answer: Arrays) -> str:
    """Why the answer cannot be compared at all ("" when it can): an output
    missing or shaped otherwise, which post-processing would choke on."""
    for name, expected in reference.items():
        got = answer.get(name)
        if got is None:
            return f"output '{name}' is missing"
        if got.shape != expected.shape:
            shapes = f"{list(got.shape)}, ONNX Runtime's {list(expected.shape)}"
            return f"output '{name}' has shape {shapes}"
    return ""


def _lane_count(lanes: Arrays) -> int:
    return int(np.asarray(lanes["lane_scores"]).size)
