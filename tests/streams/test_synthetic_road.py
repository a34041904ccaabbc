"""The synthetic road: reproducible frames whose ground truth sits on paint."""

from __future__ import annotations

import numpy as np

from edgebox.streams.synthetic_road import SyntheticRoad, render_road


def test_a_seed_always_renders_the_same_frame():
    a, b = render_road(42), render_road(42)
    assert np.array_equal(a.image, b.image)
    assert all(np.array_equal(x, y) for x, y in zip(a.lanes, b.lanes, strict=True))
    assert not np.array_equal(a.image, render_road(43).image)


def test_ground_truth_lies_inside_the_frame_bottom_up():
    for seed in range(20):
        road = render_road(seed, width=800, height=450)
        assert road.image.shape == (450, 800, 3) and road.image.dtype == np.uint8
        assert 2 <= len(road.lanes) <= 4
        for lane in road.lanes:
            assert (lane[:, 0] >= 0).all() and (lane[:, 0] <= 799).all()
            assert (np.diff(lane[:, 1]) < 0).all(), "ordered from the bottom up"


def test_solid_lines_are_painted_where_the_truth_says():
    """Along a solid line's truth the frame is brighter than the road beside it."""
    checked = 0
    for seed in range(30):
        road = render_road(seed)
        grey = road.image.astype(np.float32).mean(axis=2)
        for lane in road.lanes:
            near = lane[lane[:, 1] > 250]
            if len(near) < 5:
                continue
            xs, ys = near[:, 0].round().astype(int), near[:, 1].round().astype(int)
            on = grey[ys, xs]
            beside = grey[ys, np.clip(xs + 25, 0, 639)]
            if (on > beside + 20).mean() > 0.9:
                checked += 1
    assert checked >= 10


def test_the_drive_moves_the_dashes_but_keeps_the_road():
    drive = SyntheticRoad(seed=5)
    first, second = drive.next_frame(), drive.next_frame()
    assert not np.array_equal(first.image, second.image)
    assert len(first.lanes) == len(second.lanes)
    for a, b in zip(first.lanes, second.lanes, strict=True):
        assert abs(a[0, 0] - b[0, 0]) < 5
