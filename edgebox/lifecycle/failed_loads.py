"""Versions whose load failed, remembered with their reason so the same load
is not tried again for nothing.

A version that failed with a given config and files (its *source*) is not
tried again until one of them changes: the poller would otherwise retry a
broken model on every poll, failing each time for the same reason. A load
request insists (``retry_failed``), and so does an ensemble whose missing step
came back. The reason is kept, so a load that skips the version still says
why it is not serving.
"""

from __future__ import annotations

import threading


class FailedLoads:
    """Thread-safe: loads of different models record and clear side by side,
    each holding the lock only for the bookkeeping."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: dict[tuple[str, int], tuple[tuple, str]] = {}
        """(model, version) -> (source, reason)."""

    def reason(self, name: str, version: int, source: tuple) -> str | None:
        """Why ``version`` failed when it last tried to load from ``source``;
        None when it did not fail, or failed from another source."""
        failed = self._failed.get((name, version))
        if failed is None or failed[0] != source:
            return None
        return failed[1]

    def record(self, name: str, version: int, source: tuple, reason: str) -> None:
        with self._lock:
            self._failed[(name, version)] = (source, reason)

    def clear(self, name: str, version: int) -> None:
        with self._lock:
            self._failed.pop((name, version), None)

    def any_of(self, name: str) -> bool:
        with self._lock:
            return any(key[0] == name for key in self._failed)

    def forget(self, name: str, keep: list[int] | None = None) -> None:
        """Drop what ``name``'s versions failed with, but for the versions in
        ``keep`` (those whose folders are still there)."""
        with self._lock:
            for key in [k for k in self._failed if k[0] == name]:
                if keep is None or key[1] not in keep:
                    del self._failed[key]
