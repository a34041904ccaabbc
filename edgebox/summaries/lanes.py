"""The ``lanes`` rule: a lane detector's outputs (``lane_pipeline``'s) as
lanes, each a score and its points in frame pixels; other outputs as the
``tensors`` rule gives them."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgebox.summaries.tensors import SummaryError, tensor_summary
from edgebox.tensors import Tensor

LANE_OUTPUTS = ("lane_scores", "lane_points", "lane_point_counts")
"""Scores [N], all lanes' (x, y) points concatenated [M, 2] in frame pixels,
and points per lane [N]."""


def summarize_lanes(outputs: list[Tensor]) -> dict[str, Any]:
    by_name = {tensor.name: tensor for tensor in outputs}
    missing = [name for name in LANE_OUTPUTS if name not in by_name]
    if missing:
        raise SummaryError(
            f"the 'lanes' rule needs outputs {', '.join(LANE_OUTPUTS)}; missing "
            f"{', '.join(missing)}"
        )
    summary: dict[str, Any] = {
        "lanes": decode_lanes(*(by_name.pop(name).data for name in LANE_OUTPUTS))
    }
    for name, tensor in by_name.items():
        summary[name] = tensor_summary(tensor)
    return summary


def decode_lanes(
    scores: np.ndarray, points: np.ndarray, counts: np.ndarray
) -> list[dict[str, Any]]:
    """``[{"score": s, "points": [[x, y], ...]}, ...]``; pixels to 0.1, scores to 1e-4."""
    scores = scores.reshape(-1)
    counts = counts.reshape(-1).astype(np.int64)
    if points.size % 2:
        raise SummaryError(f"'lane_points' must be [M, 2], got shape {list(points.shape)}")
    points = points.reshape(-1, 2)
    if len(counts) != len(scores):
        raise SummaryError(
            f"'lane_scores' has {len(scores)} lanes but 'lane_point_counts' has {len(counts)}"
        )
    if (counts < 0).any() or int(counts.sum()) != len(points):
        raise SummaryError(
            f"'lane_point_counts' adds up to {int(counts.sum())} points but 'lane_points' "
            f"has {len(points)}"
        )
    rounded = np.round(points.astype(np.float64), 1)
    per_lane = np.split(rounded, np.cumsum(counts)[:-1]) if len(counts) else []
    return [
        {"score": round(float(score), 4), "points": lane.tolist()}
        for score, lane in zip(scores, per_lane, strict=True)
    ]
