"""How many ``ModelStreamInfer`` streams may be open: in all, and from one
client address.

In the synchronous gRPC server an open stream holds two threads (the one
grpc answers it on and the one reading its requests) for as long as it is
open, idle or not. Bounding streams bounds those threads, and the handler
pool is sized so that streams at their bound still leave ``thread_count``
threads to every other call; the per-client bound keeps one client from
taking every stream there is. A stream past either bound is refused at once
(RESOURCE_EXHAUSTED) rather than left waiting for a thread.
"""

from __future__ import annotations

import threading


class StreamSlots:
    def __init__(self, total: int, per_client: int) -> None:
        self.total = max(1, total)
        self.per_client = max(1, min(per_client, self.total))
        self._lock = threading.Lock()
        self._open = 0
        self._by_client: dict[str, int] = {}

    def take(self, client: str) -> str | None:
        """None when a slot was taken for ``client`` (give it back with
        ``give``); otherwise why none was."""
        with self._lock:
            mine = self._by_client.get(client, 0)
            if mine >= self.per_client:
                return (
                    f"this client already has {mine} ModelStreamInfer streams open, the most "
                    f"one client may (--grpc-max-streams-per-client); close one first"
                )
            if self._open >= self.total:
                return (
                    f"{self._open} ModelStreamInfer streams are open, the most this server "
                    "allows (--grpc-max-streams); try again when one closes"
                )
            self._open += 1
            self._by_client[client] = mine + 1
            return None

    def give(self, client: str) -> None:
        with self._lock:
            self._open -= 1
            left = self._by_client[client] - 1
            if left:
                self._by_client[client] = left
            else:
                del self._by_client[client]

    @property
    def open(self) -> int:
        return self._open
