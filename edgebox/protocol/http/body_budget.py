"""The bytes of request bodies the HTTP server holds at once, capped at
``max_body_bytes_in_flight``.

Why: a body is read into memory whole before its handler runs, so without a
cap many clients each declaring a large body and sending it slowly could grow
the daemon's memory without bound. A body whose length is known is reserved
before it is read (the client gets a readable 503 if there is no room); a
chunked body is reserved piece by piece as it grows. A reservation ends when
the body's buffer is freed, not when its request is answered: a finalizer on
the buffer releases it, so a body a handler still holds stays counted.

Threads: the I/O thread and workers reserve; finalizers release on whichever
thread drops the last reference. ``BodyBudget`` guards its count with a lock.
"""

from __future__ import annotations

import threading
import weakref
from http import HTTPStatus

from edgebox.protocol.http.messages import HttpResponse, json_error_response

UNCOUNTED_BODY_BYTES = 65536
"""Bodies this small are not counted against ``max_body_bytes_in_flight``:
connections bound them (1024 x 64 KiB), and a small request keeps its hot path
free of the bookkeeping."""


def default_body_bytes_in_flight(max_request_bytes: int) -> int:
    """Room for four of the largest requests, and never less than 256 MiB."""
    return max(4 * max_request_bytes, 256 * 1024 * 1024)


class BodyBudget:
    """Bytes of request bodies held at once, across every connection: reserved
    when a body's size is known (before it is read), released when its buffer is
    freed (a finalizer on the buffer, so a body a handler still holds stays
    counted). Called from the I/O thread and workers; finalizers run on
    whichever thread drops the last reference."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self._held + size > self.limit:
                return False
            self._held += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._held -= size

    def refusal(self, size: int) -> HttpResponse:
        return json_error_response(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"server busy: a request body of {size} bytes would take the bodies held at once "
            f"past {self.limit} bytes (--http-max-body-bytes-in-flight); retry later",
        )


class ChunkedBody(bytearray):
    """A chunked body as it grows, each piece reserved before it is kept; a
    subclass of bytearray so that a finalizer can release what it reserved."""

    def __init__(self, budget: BodyBudget) -> None:
        super().__init__()
        self.budget = budget
        self.reserved = [0]
        weakref.finalize(self, _release_reserved, budget, self.reserved)

    def take(self, data: bytes) -> bool:
        """Append ``data`` if the budget has room; False (nothing kept) if not."""
        if not self.budget.reserve(len(data)):
            return False
        self.reserved[0] += len(data)
        self.extend(data)
        return True


def _release_reserved(budget: BodyBudget, reserved: list[int]) -> None:
    budget.release(reserved[0])
