"""The small parts a stream is built from: the drop-oldest queue, backoff
and the output summary."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from edgebox.backoff import Backoff
from edgebox.streams.frame_queue import FrameQueue
from edgebox.streams.summary import SummaryError, decode_lanes, summarize
from edgebox.tensors import Tensor


def test_full_queue_drops_the_oldest_and_counts_it():
    queue = FrameQueue(2)
    assert [queue.put(i) for i in range(5)] == [False, False, True, True, True]
    assert queue.dropped == 3
    assert [queue.get(0), queue.get(0), queue.get(0)] == [3, 4, None]


def test_close_wakes_a_waiting_consumer_with_none():
    queue = FrameQueue(1)
    got = []
    consumer = threading.Thread(target=lambda: got.append(queue.get()))
    consumer.start()
    queue.close()
    consumer.join(5)
    assert got == [None]
    assert queue.put("late") is False and len(queue) == 0


def test_wait_for_room_returns_when_the_consumer_takes_an_item():
    queue = FrameQueue(1)
    assert queue.wait_for_room(0) is True
    queue.put("a")
    assert queue.wait_for_room(0) is False, "full: no room"
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.wait_for_room()))
    waiter.start()
    assert queue.get() == "a"
    waiter.join(5)
    assert got == [True]
    queue.put("b")
    waiter = threading.Thread(target=lambda: got.append(queue.wait_for_room()))
    waiter.start()
    queue.close()
    waiter.join(5)
    assert got == [True, False], "closing wakes the producer with False"


def test_backoff_doubles_up_to_its_cap():
    backoff = Backoff(initial_s=0.5, max_s=10, factor=2)
    assert [backoff.delay_s(n) for n in range(7)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert backoff.delay_s(10_000) == 10


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
