"""Frames inferred side by side are handed on in the order they were taken."""

from __future__ import annotations

import threading

from edgebox.streams.in_order import InOrder


def test_a_later_ticket_waits_for_every_earlier_one() -> None:
    order = InOrder()
    first, second = order.take(), order.take()
    served: list[int] = []
    second_waiting = threading.Event()

    def later() -> None:
        second_waiting.set()
        with order.turn(second):
            served.append(second)

    thread = threading.Thread(target=later)
    thread.start()
    assert second_waiting.wait(5)
    thread.join(0.05)
    assert thread.is_alive() and served == [], "ticket 1 went before ticket 0"
    with order.turn(first):
        served.append(first)
    thread.join(5)
    assert served == [first, second]


def test_a_turn_that_fails_still_lets_the_next_one_go() -> None:
    order = InOrder()
    first, second = order.take(), order.take()
    try:
        with order.turn(first):
            raise RuntimeError("frame failed")
    except RuntimeError:
        pass
    done = threading.Event()

    def later() -> None:
        with order.turn(second):
            done.set()

    threading.Thread(target=later, daemon=True).start()
    assert done.wait(5), "a failed turn held up the next ticket"
