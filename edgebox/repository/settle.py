"""The half-copy guard: a version folder is taken only once its files stopped
changing.

A folder is settled when its fingerprint (every file's size, mtime and ctime)
is the same on two consecutive polls, or, on first sight, when nothing in it
changed since before the previous poll: it was complete before it became
visible, i.e. it arrived by an atomic rename. ctime counts because copies that
preserve mtimes (``cp -a``, rsync) cannot preserve it. The folder's own times are
part of the fingerprint, so a file appearing or vanishing counts as a change.
"""

from __future__ import annotations

from pathlib import Path

from edgebox.repository.layout import Fingerprint, VersionFolder


class SettleTracker:
    """Remembers the previous poll's fingerprints. Used by the poller thread only."""

    def __init__(self) -> None:
        self._previous: dict[Path, Fingerprint] = {}
        self._previous_poll_ns: int | None = None

    def settled(self, folders: list[VersionFolder], poll_started_ns: int) -> set[Path]:
        """Paths of the folders that may be loaded now; call once per poll."""
        ready: set[Path] = set()
        current: dict[Path, Fingerprint] = {}
        for folder in folders:
            current[folder.path] = folder.fingerprint
            if not folder.fingerprint:
                continue
            before = self._previous.get(folder.path)
            if before == folder.fingerprint or (before is None and self._arrived_complete(folder)):
                ready.add(folder.path)
        self._previous = current
        self._previous_poll_ns = poll_started_ns
        return ready

    def _arrived_complete(self, folder: VersionFolder) -> bool:
        if self._previous_poll_ns is None:
            return False
        newest = max(max(mtime, ctime) for _, _, mtime, ctime in folder.fingerprint)
        return newest < self._previous_poll_ns
