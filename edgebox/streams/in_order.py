"""Results of frames inferred side by side, handed on in the order the frames
were taken."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class InOrder:
    """Tickets in the order frames leave the queue; ``turn(ticket)`` waits
    until every earlier ticket has had its turn.

    With two frames in flight the later one may finish first (a short frame,
    the other waiting on the GPU); subscribers still see frame k before k+1.
    Every ticket taken must have its turn, or later ones wait for ever: the
    inference loop gives each frame its turn whether it succeeded or not."""

    def __init__(self) -> None:
        self._next_ticket = 0
        self._serving = 0
        self._changed = threading.Condition()

    def take(self) -> int:
        with self._changed:
            ticket = self._next_ticket
            self._next_ticket += 1
            return ticket

    @contextmanager
    def turn(self, ticket: int) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self._serving == ticket)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                self._changed.notify_all()
