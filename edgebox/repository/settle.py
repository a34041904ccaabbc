"""The half-copy guard: a version folder is taken only once its files stopped
changing.

A folder is settled when its fingerprint (every file's size, mtime and ctime)
is the same on two consecutive polls, or, on first sight, when nothing in it
changed since well before the previous poll: it was complete before it became
visible, i.e. it arrived by an atomic rename. ctime counts because copies that
preserve mtimes (``cp -a``, rsync) cannot preserve it. The folder's own mtime is
part of the fingerprint, so a file appearing or vanishing counts as a change.
File times come from the kernel's coarse clock, a few milliseconds behind
``time.time_ns()``; ``CLOCK_MARGIN_NS`` keeps a file written during a scan from
passing as older than that scan.
"""

from __future__ import annotations

from pathlib import Path

from edgebox.repository.layout import Fingerprint, VersionFolder

CLOCK_MARGIN_NS = 1_000_000_000


class SettleTracker:
    """Remembers the previous poll's fingerprints. Used by the poller thread only."""

    def __init__(self) -> None:
        self._previous: dict[Path, Fingerprint] = {}
        self._previous_poll_ns: int | None = None

    def prime(self, folders: list[VersionFolder], poll_started_ns: int) -> None:
        """Take these folders as already settled (what startup loaded)."""
        self._previous = {folder.path: folder.fingerprint for folder in folders}
        self._previous_poll_ns = poll_started_ns

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
        return newest < self._previous_poll_ns - CLOCK_MARGIN_NS
