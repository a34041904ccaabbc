"""The small parts a stream is built from: the drop-oldest queue, backoff
and the output summary."""

from __future__ import annotations

import threading

from edgebox.backoff import Backoff
from edgebox.streams.frame_queue import FrameQueue


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
