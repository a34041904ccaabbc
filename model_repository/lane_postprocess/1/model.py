"""lane_detector proposals -> lanes, written as for Triton's python backend.

LaneATT's decoding: softmax over each proposal's (background, lane) logits,
keep those above the threshold, then greedy lane NMS (the best proposal wins
and removes every other proposal that runs within the NMS distance of it on a
good part of its rows), up to max_lanes. A lane's points are its x on the rows from its
start for its length, inside the image, mapped back to the frame's pixels.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

MODEL_HEIGHT, MODEL_WIDTH = 360, 640
ROWS = 72
ROW_YS = (MODEL_HEIGHT - 1) * (1 - np.arange(ROWS) / (ROWS - 1))
MIN_POINTS = 2
MIN_SHARED_ROWS = 3
OVERLAP_FRACTION = 0.3
"""A proposal running within the NMS distance of a better lane on this share
of its rows is the same lane: proposals that share a lane's far end but
fan out below it are suppressed, not just near-parallel twins."""


def lane_probabilities(proposals: np.ndarray) -> np.ndarray:
    """A proposal with a non-finite logit (an FP16 engine that overflowed) gets
    NaN, which no threshold passes: no lane, and no warning per frame."""
    logits = proposals[:, :2].astype(np.float64)
    with np.errstate(invalid="ignore"):
        logits -= logits.max(axis=1, keepdims=True)
        odds = np.exp(logits)
        return (odds[:, 1] / odds.sum(axis=1)).astype(np.float32)


def rows_present(proposals: np.ndarray) -> np.ndarray:
    """[P, 72] bool: rows each proposal claims, inside the image."""
    start = np.clip(np.round(proposals[:, 2] * (ROWS - 1)), 0, ROWS - 1)[:, None]
    length = np.round(np.maximum(proposals[:, 4], 0))[:, None]
    index = np.arange(ROWS)[None, :]
    xs = proposals[:, 5:]
    return (index >= start) & (index < start + length) & (xs >= 0) & (xs <= MODEL_WIDTH - 1)


def decode_lanes(proposals, frame_height, frame_width, score_threshold, nms_distance_px,
                 max_lanes):
    """[2784, 77] -> (scores [L], list of [K, 2] (x, y) arrays in frame pixels)."""
    probability = lane_probabilities(proposals)
    candidates = np.flatnonzero(probability > score_threshold)
    candidates = candidates[np.argsort(-probability[candidates], kind="stable")]
    present = rows_present(proposals[candidates])
    present &= present.sum(axis=1, keepdims=True) >= MIN_POINTS
    xs = proposals[candidates, 5:]
    alive = present.any(axis=1)

    kept = []
    while len(kept) < max_lanes and alive.any():
        best = int(np.flatnonzero(alive)[0])
        kept.append(best)
        close = present & present[best] & (np.abs(xs - xs[best]) < nms_distance_px)
        shorter = np.minimum(present.sum(axis=1), present[best].sum())
        overlap = close.sum(axis=1)
        alive &= ~((overlap >= MIN_SHARED_ROWS) & (overlap >= OVERLAP_FRACTION * shorter))
        alive[best] = False

    sx = frame_width / MODEL_WIDTH
    sy = frame_height / MODEL_HEIGHT
    lanes = []
    for index in kept:
        rows = present[index]
        points = np.stack([(xs[index][rows] + 0.5) * sx - 0.5, (ROW_YS[rows] + 0.5) * sy - 0.5], 1)
        lanes.append(points.astype(np.float32))
    return probability[candidates[kept]], lanes


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.score_threshold = float(parameters.get("score_threshold", "0.5"))
        self.nms_distance_px = float(parameters.get("nms_distance_px", "20"))
        self.max_lanes = int(parameters.get("max_lanes", "6"))

    def execute(self, requests):
        responses = []
        for request in requests:
            proposals = pb_utils.get_input_tensor_by_name(request, "predict_lanes").as_numpy()
            height, width = pb_utils.get_input_tensor_by_name(request, "frame_size").as_numpy()
            if height < 1 or width < 1:
                # The client's mistake, so a 400 (INVALID_ARG), as Triton's examples answer.
                error = pb_utils.TritonError(
                    "lane_postprocess: 'frame_size' must be the frame's (height, width) in "
                    f"pixels, both positive, got [{height}, {width}]",
                    pb_utils.TritonError.INVALID_ARG,
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            scores, lanes = decode_lanes(
                proposals[0].astype(np.float32), int(height), int(width),
                self.score_threshold, self.nms_distance_px, self.max_lanes,
            )
            points = np.concatenate(lanes) if lanes else np.zeros((0, 2), np.float32)
            counts = np.array([len(lane) for lane in lanes], np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("lane_scores", scores.astype(np.float32)),
                pb_utils.Tensor("lane_points", points),
                pb_utils.Tensor("lane_point_counts", counts),
            ]))
        return responses
