"""How a new lane_detector version is judged in a rollout (config.pbtxt
``rollout_compare: custom``): its proposals compared as lanes, in pixels.

The detector answers one proposal per fixed anchor: (background, lane)
logits, start, length, and the lane's x on 72 rows of the 640x360 network
input. A re-exported or quantised detector moves logits and x a little; a
broken one moves lanes. So: the anchors the serving version calls lanes
(probability over 0.5) must be lanes in the new version's answer too, and
on the rows the serving version claims, the new x may lie at most
``rollout_max_px`` pixels away on average. Raw logits are not compared.
"""

import numpy as np

ROWS = 72
WIDTH = 640
THRESHOLD = 0.5


def _lane_anchors(proposals):
    logits = proposals[:, :2].astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    odds = np.exp(logits)
    return np.flatnonzero(odds[:, 1] / odds.sum(axis=1) > THRESHOLD)


def _rows(proposal):
    start = int(np.clip(np.round(proposal[2] * (ROWS - 1)), 0, ROWS - 1))
    length = int(np.round(max(proposal[4], 0.0)))
    rows = np.zeros(ROWS, dtype=bool)
    rows[start : start + length] = True
    xs = proposal[5:]
    return rows & (xs >= 0) & (xs <= WIDTH - 1)


def compare(baseline, candidate, policy):
    serving = baseline["predict_lanes"].reshape(-1, 77)
    new = candidate["predict_lanes"].reshape(-1, 77)
    lanes, new_lanes = _lane_anchors(serving), _lane_anchors(new)
    if len(lanes) != len(new_lanes) or (lanes != new_lanes).any():
        return False, f"lanes: {len(new_lanes)} lane anchors, the serving version sees {len(lanes)}"
    gaps = [np.abs(new[i, 5:] - serving[i, 5:])[_rows(serving[i])] for i in lanes]
    gaps = np.concatenate(gaps) if gaps else np.zeros(0)
    mean = float(gaps.mean()) if gaps.size else 0.0
    if mean > policy.max_px:
        return False, f"lanes: mean point distance {round(mean, 1)} px > max_px {policy.max_px}"
    return True, ""
