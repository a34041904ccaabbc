"""The half-copy guard: a version folder (or a ``config.pbtxt``) is taken only
once its files stopped changing.

A folder is settled when its fingerprint (every file's size, mtime and ctime)
is the same on two consecutive polls, or on first sight when it arrived by an
atomic rename: either the poller saw the rename's mark (see
``layout.renamed_in``) with no file in it still open for writing, or nothing in
it changed since well before the previous poll. ctime counts because copies that
preserve mtimes (``cp -a``, rsync) cannot preserve it. The folder's own mtime is
part of the fingerprint, so a file appearing or vanishing counts as a change.
Something absent (an empty fingerprint, e.g. a model folder without its config,
which a config-less model is) settles once it has stayed absent for two polls,
or at first sight in a folder renamed into place complete.
File times come from the kernel's coarse clock, a few milliseconds behind
``time.time_ns()``; ``CLOCK_MARGIN_NS`` keeps a file written during a scan from
passing as older than that scan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from edgebox.repository.layout import Fingerprint

CLOCK_MARGIN_NS = 1_000_000_000


class SettleTracker:
    """Remembers the previous poll's fingerprints. Used by the poller thread only."""

    def __init__(self) -> None:
        self._previous: dict[Path, Fingerprint] = {}
        self._previous_poll_ns: int | None = None

    def prime(self, prints: Mapping[Path, Fingerprint], poll_started_ns: int) -> None:
        """Take these as already settled (what startup loaded)."""
        self._previous = dict(prints)
        self._previous_poll_ns = poll_started_ns

    def settled(
        self,
        prints: Mapping[Path, Fingerprint],
        poll_started_ns: int,
        renamed_in: Collection[Path] = (),
    ) -> set[Path]:
        """The paths whose contents may be loaded now; call once per poll with
        the fingerprint of every version folder and config file seen.
        ``renamed_in`` are paths the caller saw arrive by rename, complete and
        with no file still open for writing: taken at first sight."""
        ready: set[Path] = set()
        for path, fingerprint in prints.items():
            before = self._previous.get(path)
            if before == fingerprint or (
                before is None
                and (
                    path in renamed_in
                    or (bool(fingerprint) and self._arrived_complete(fingerprint))
                )
            ):
                ready.add(path)
        self._previous = dict(prints)
        self._previous_poll_ns = poll_started_ns
        return ready

    def _arrived_complete(self, fingerprint: Fingerprint) -> bool:
        if self._previous_poll_ns is None:
            return False
        newest = max(max(mtime, ctime) for _, _, mtime, ctime in fingerprint)
        return newest < self._previous_poll_ns - CLOCK_MARGIN_NS
