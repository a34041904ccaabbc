"""How well detected lanes match the synthetic road's ground truth.

A true lane is found when some detected lane covers at least
MIN_COVERAGE of its ground-truth rows and, over those rows, lies within
MAX_MEAN_ERROR_PX horizontally on average (measured at 640x360). A detected
lane that finds no true lane is a false lane. A frame passes when every true
lane is found and it has at most one false lane.

    python scripts/lane_accuracy.py [FRAMES] [--model model.onnx]

runs the lane models' own code (pre-processing, ONNX Runtime, decoding)
without a server, for tuning; tests measure the same through lane_pipeline
over HTTP.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MAX_MEAN_ERROR_PX = 8.0
MIN_COVERAGE = 0.7
MAX_FALSE_LANES = 1
ACCURACY_SEED_BASE = 10_000
"""The accuracy set is frames render_road(ACCURACY_SEED_BASE + i)."""


@dataclass(frozen=True)
class FrameScore:
    true_lanes: int
    found: int
    false_lanes: int
    errors: tuple[float, ...]
    """Mean horizontal error of each found lane, px."""

    @property
    def passed(self) -> bool:
        return self.found == self.true_lanes and self.false_lanes <= MAX_FALSE_LANES


def _error_against(
    truth: np.ndarray, lane: np.ndarray, row_tolerance: float
) -> tuple[float, float]:
    """(coverage, mean |dx|) of ``lane`` over ``truth``'s rows."""
    if len(lane) < 2:
        return 0.0, float("inf")
    order = np.argsort(lane[:, 1])
    ly, lx = lane[order, 1], lane[order, 0]
    covered = (truth[:, 1] >= ly[0] - row_tolerance) & (truth[:, 1] <= ly[-1] + row_tolerance)
    if not covered.any():
        return 0.0, float("inf")
    x = np.interp(truth[covered, 1], ly, lx)
    return float(covered.mean()), float(np.abs(x - truth[covered, 0]).mean())


def score_frame(
    truth: tuple[np.ndarray, ...], detected: list[np.ndarray], width: int = 640
) -> FrameScore:
    """Greedy one-to-one matching, best (lowest error) pairs first."""
    scale = 640.0 / width
    row_tolerance = 6.0 / scale
    pairs = []
    for t, true_lane in enumerate(truth):
        for d, lane in enumerate(detected):
            coverage, error = _error_against(true_lane, lane, row_tolerance)
            error *= scale
            if coverage >= MIN_COVERAGE and error <= MAX_MEAN_ERROR_PX:
                pairs.append((error, t, d))
    used_t, used_d, errors = set(), set(), []
    for error, t, d in sorted(pairs):
        if t not in used_t and d not in used_d:
            used_t.add(t)
            used_d.add(d)
            errors.append(error)
    return FrameScore(len(truth), len(used_t), len(detected) - len(used_d), tuple(errors))


def split_lanes(points: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    if len(counts) == 0:
        return []
    return np.split(np.asarray(points), np.cumsum(counts)[:-1])


def summarize(scores: list[FrameScore]) -> str:
    passed = sum(s.passed for s in scores)
    errors = [e for s in scores for e in s.errors]
    missed = sum(s.true_lanes - s.found for s in scores)
    false = sum(s.false_lanes for s in scores)
    return (
        f"{passed}/{len(scores)} frames pass ({100.0 * passed / len(scores):.1f}%); "
        f"lanes found {sum(s.found for s in scores)}/{sum(s.true_lanes for s in scores)}, "
        f"missed {missed}, false {false}; mean error {np.mean(errors) if errors else 0:.2f} px"
    )


def _load_model_module(name: str):
    shim = ROOT / "edgebox" / "backends" / "python"
    if str(shim) not in sys.path:
        sys.path.insert(0, str(shim))
    path = ROOT / "model_repository" / name / "1" / "model.py"
    spec = importlib.util.spec_from_file_location(f"_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    import onnxruntime

    from edgebox.streams.synthetic_road import render_road

    parser = argparse.ArgumentParser()
    parser.add_argument("frames", type=int, nargs="?", default=200)
    parser.add_argument(
        "--model", type=Path, default=ROOT / "model_repository/lane_detector/1/model.onnx"
    )
    parser.add_argument("--show-failures", action="store_true")
    parser.add_argument(
        "--seed-base", type=int, default=ACCURACY_SEED_BASE,
        help="first seed; another base gives frames the detector was never tuned on",
    )
    args = parser.parse_args(argv)

    pre = _load_model_module("lane_preprocess")
    post = _load_model_module("lane_postprocess")
    session = onnxruntime.InferenceSession(str(args.model), providers=["CPUExecutionProvider"])
    scores = []
    for i in range(args.frames):
        seed = args.seed_base + i
        frame = render_road(seed)
        proposals = session.run(None, {"input": pre.to_model_input(frame.image)})[0][0]
        height, width = frame.image.shape[:2]
        _, lanes = post.decode_lanes(proposals, height, width, 0.5, 20.0, 6)
        score = score_frame(frame.lanes, lanes, width)
        scores.append(score)
        if args.show_failures and not score.passed:
            print(f"seed {seed}: {score}")
    print(summarize(scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
