"""A model's outputs as a small JSON-able summary, built on the inference
thread for every result; lane detectors get their lanes decoded.

Small outputs are given whole (as nested lists); large ones only by datatype
and shape, so a result stays a few kilobytes whatever the model returns.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgebox.tensors import Tensor

SMALL_OUTPUT_ELEMENTS = 64
"""Outputs with at most this many elements are included whole."""
LANE_OUTPUTS = ("lane_scores", "lane_points", "lane_point_counts")
"""``lane_pipeline``'s outputs: scores [N], all lanes' (x, y) points
concatenated [M, 2] in frame pixels, and points per lane [N]."""


class SummaryError(Exception):
    """The outputs contradict themselves (e.g. lane counts vs points)."""


def summarize(outputs: list[Tensor]) -> dict[str, Any]:
    by_name = {tensor.name: tensor for tensor in outputs}
    summary: dict[str, Any] = {}
    if all(name in by_name for name in LANE_OUTPUTS):
        summary["lanes"] = decode_lanes(*(by_name.pop(name).data for name in LANE_OUTPUTS))
    for name, tensor in by_name.items():
        summary[name] = _tensor_summary(tensor)
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


def _tensor_summary(tensor: Tensor) -> Any:
    data = tensor.data
    if data.size > SMALL_OUTPUT_ELEMENTS:
        return {"datatype": tensor.datatype, "shape": list(data.shape)}
    return _to_list(data)


def _to_list(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        if data.ndim == 0:
            return _scalar(data[()])
        return [_to_list(item) for item in data]
    return _scalar(data)


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.floating):
        # str() gives float32's shortest repr (0.1, not 0.10000000149011612).
        number = float(str(value))
        return number if math.isfinite(number) else None
    if isinstance(value, np.generic):
        return value.item()
    return value
