"""The lane pipeline's parts on their own: the detector network the script
builds, and the pre/post-processing model.py files' functions."""

from __future__ import annotations

import hashlib

import numpy as np
import onnxruntime
import pytest

from edgebox.streams.synthetic_road import render_road
from scripts.lane_accuracy import _load_model_module
from scripts.lane_detector import build_lane_detector

preprocess = _load_model_module("lane_preprocess")
postprocess = _load_model_module("lane_postprocess")


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    path = build_lane_detector(tmp_path_factory.mktemp("lane") / "model.onnx")
    return path, onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_the_detector_is_built_the_same_every_time(detector, tmp_path):
    again = build_lane_detector(tmp_path / "again.onnx")
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (detector[0], again)]
    assert digest[0] == digest[1]


def test_the_detector_has_laneatts_interface_and_batches(detector):
    _, session = detector
    frames = np.concatenate([preprocess.to_model_input(render_road(s).image) for s in (1, 2)])
    batched = session.run(None, {"input": frames})[0]
    assert batched.shape == (2, 2784, 77)
    one = session.run(None, {"input": frames[1:]})[0]
    np.testing.assert_allclose(batched[1], one[0], rtol=1e-4, atol=1e-3)
    assert not np.allclose(batched[0], batched[1]), "different roads, different proposals"


def test_lane_probability_follows_the_paint(detector):
    _, session = detector
    road = render_road(7)
    proposals = session.run(None, {"input": preprocess.to_model_input(road.image)})[0][0]
    painted_over = road.image.copy()
    painted_over[int(road.image.shape[0] * 0.45):] = np.median(road.image[-40:], axis=(0, 1))
    blank = session.run(None, {"input": preprocess.to_model_input(painted_over)})[0][0]
    assert postprocess.lane_probabilities(proposals).max() > 0.9
    assert postprocess.lane_probabilities(blank).max() < 0.5


def test_the_detector_finds_where_the_roads_lines_meet(tmp_path):
    path = build_lane_detector(tmp_path / "probed.onnx", probes=True)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for seed in (3, 11, 19, 27):
        road = render_road(seed)
        found = dict(zip(
            [o.name for o in session.get_outputs()],
            session.run(None, {"input": preprocess.to_model_input(road.image)}),
            strict=True,
        ))
        x_v, horizon = road.vanishing_point
        assert abs(found["probe_horizon"].item() - horizon) <= 3.0, seed
        assert abs(found["probe_x_v"].item() - x_v) <= 6.0, seed


def test_preprocessing_resizes_any_frame_to_rgb_chw_in_unit_range():
    frame = np.zeros((720, 1280, 3), np.uint8)
    frame[..., 0] = 255  # blue in BGR
    tensor = preprocess.to_model_input(frame, np.float16)
    assert tensor.shape == (1, 3, 360, 640) and tensor.dtype == np.float16
    assert tensor[0, 2].min() == 1.0 and tensor[0, :2].max() == 0.0


def _proposal(xs, score, start=0, length=40):
    row = np.zeros(77, np.float32)
    row[1] = score
    row[2] = start / 71
    row[4] = length
    row[5:] = xs
    return row


def test_decoding_keeps_the_best_of_each_lane_and_maps_to_frame_pixels():
    rows = np.arange(72)
    left = 100 + 3.0 * rows
    right = 540 - 3.0 * rows
    proposals = np.stack([
        _proposal(left, 5.0),
        _proposal(left + 4, 4.0),  # the same lane, weaker: suppressed
        _proposal(right, 3.0),
        _proposal(right - 200, -3.0),  # below the threshold
    ])
    scores, lanes = postprocess.decode_lanes(proposals, 720, 1280, 0.5, 20.0, 6)
    assert len(lanes) == 2 and scores[0] > scores[1] > 0.5
    np.testing.assert_allclose(lanes[0][:, 0], (left[:40] + 0.5) * 2 - 0.5, atol=1e-3)
    assert lanes[0][0, 1] == pytest.approx((359 + 0.5) * 2 - 0.5) and len(lanes[0]) == 40


def test_decoding_drops_points_outside_the_image_and_honours_max_lanes():
    rows = np.arange(72)
    proposals = np.stack([_proposal(-50 + 10.0 * rows, 5.0), _proposal(300 + 0 * rows, 4.0),
                          _proposal(400 + 0 * rows, 3.0)])
    _, lanes = postprocess.decode_lanes(proposals, 360, 640, 0.5, 20.0, 2)
    assert len(lanes) == 2
    assert lanes[0][:, 0].min() >= 0 and len(lanes[0]) == 35
