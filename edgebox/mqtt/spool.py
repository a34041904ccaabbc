"""Store and forward for MQTT: every message gets its ``epoch`` and ``seq``
and waits here until the broker acknowledges it; what the broker has not
acknowledged within ``write_delay_s`` is written to the spool file
(spool_file.py), so a broker outage loses nothing and a healthy link writes
nothing. Delivery is at least once; a re-sent message keeps its epoch and seq.

Why the delay: committing every message before sending it wrote 27-45 times
the payload to the device's eMMC or SD card with the broker up (about
1.2 GB an hour for one 8 fps stream), to keep messages that were acknowledged
milliseconds later. The price is a window: a ``kill -9`` or power cut loses
what was neither acknowledged nor written, at most the last ``write_delay_s``
(plus what was still on its way to the MQTT thread). The next run then starts
a new epoch (spool_file.py), which is how subscribers learn of it.

A full or read-only disk, or a corrupt database, never raises: the spool
carries on in memory with the same order, seq, cap and drop counts, and says
why in ``degraded``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgebox.mqtt.spool_file import FileFull, Spooled, SpoolFile, new_epoch
from edgebox.mqtt.spool_memory import MemoryRows

__all__ = ["DROP_ORDER", "Outgoing", "Spool", "SpoolStats", "Spooled"]

log = logging.getLogger(__name__)

DROP_ORDER = ("result", "telemetry", "event", "status")
"""Kinds in the order the cap drops them: status and events are what an operator needs after an
outage; per-frame results are the bulk and the least missed."""
FULL_FILE_RETRIES = 8
"""Writes retried after ``FileFull``, each after dropping twice as much as the one before."""


@dataclass(frozen=True)
class Outgoing:
    """One message as the publisher hands it over; the spool adds ``"seq"`` and
    ``"epoch"`` to ``document``. ``replaces_unsent`` (retained status): older
    rows of the topic still in the spool are deleted first, which is not
    counted as a drop."""

    topic: str
    document: dict
    kind: str
    qos: int = 1
    retain: bool = False
    replaces_unsent: bool = False


@dataclass(frozen=True)
class SpoolStats:
    """``bytes`` counts topic plus payload, what the cap limits; ``dropped`` totals since start."""

    rows: int
    bytes: int
    oldest_created_at: float | None
    dropped: dict[str, int]
    degraded: str | None


class Spool:
    """Owned by the MQTT thread; a lock makes every method safe from other
    threads as well (they are short).

    Rows live in two places, every row on file older than every row in
    memory (``_fresh``, not written yet): the file and memory. A row
    acknowledged or dropped while on file joins ``_gone`` and is deleted with
    the next write, so acknowledgements cost no write of their own."""

    def __init__(
        self,
        path: Path | None,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
        write_delay_s: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``write_delay_s`` 0: every append is written before it returns."""
        self._path = None if path is None else Path(path)
        self._max_bytes = max_bytes
        self._clock = clock
        self._monotonic = monotonic
        self._write_delay_s = write_delay_s
        self._lock = threading.Lock()
        self._degraded: str | None = None
        self._dropped: Counter[str] = Counter()
        self._untaken: Counter[str] = Counter()
        self._fresh = MemoryRows(DROP_ORDER)
        self._gone: set[int] = set()
        self._file_rows = self._file_bytes = 0
        """Rows on file and their bytes, ``_gone`` left out."""
        self._last_write = monotonic()
        self._last_row_id = 0
        self._oldest_on_file = 0
        self._file: SpoolFile | None = None
        self.epoch = new_epoch()
        self._seqs: dict[str, int] = {}
        if self._path is not None:
            self._open(self._path)

    @property
    def degraded(self) -> str | None:
        """Why the spool is memory-only (messages lost on restart), or None."""
        return self._degraded

    @property
    def _row_count(self) -> int:
        return len(self._fresh) + self._file_rows

    @property
    def _byte_count(self) -> int:
        return self._fresh.bytes + self._file_bytes

    def append(self, items: Sequence[Outgoing]) -> list[Spooled]:
        """Take ``items`` (written now when ``write_delay_s`` is 0), then apply
        the cap. Returns the rows kept, in order; an item bigger than the cap is
        dropped (its seq is used, so subscribers see the gap). Unknown kinds
        raise ValueError and store nothing."""
        for item in items:
            if item.kind not in DROP_ORDER:
                raise ValueError(
                    f"spool: kind '{item.kind}' of topic '{item.topic}': expected one of "
                    f"{', '.join(repr(k) for k in DROP_ORDER)}"
                )
        with self._lock:
            now, since = self._clock(), self._monotonic()
            drops: Counter[str] = Counter()
            stored: list[Spooled] = []
            for item in items:
                seq = self._seqs[item.topic] = self._seqs.get(item.topic, 0) + 1
                document = {**item.document, "seq": seq, "epoch": self.epoch}
                payload = json.dumps(document, separators=(",", ":")).encode()
                if item.replaces_unsent:
                    self._forget_topic(item.kind, item.topic)
                    stored = [s for s in stored if s.topic != item.topic]
                self._last_row_id += 1
                row = Spooled(
                    self._last_row_id, item.topic, payload, item.qos, item.retain, item.kind,
                    seq, now,
                )  # fmt: skip
                if row.size > self._max_bytes:
                    drops[item.kind] += 1
                    continue
                self._fresh.add(row, since)
                stored.append(row)
            over = self._byte_count - self._max_bytes
            if over > 0:
                drops.update(self._evict(over))
            self._count_drops(drops)
            kept = [row for row in stored if row.row_id in self._fresh]
            if self._write_delay_s <= 0:
                self._write_fresh()
            return kept

    def flush_due(self) -> bool:
        """Write what waited ``write_delay_s`` unacknowledged (all of memory
        then, in one transaction), and delete what was acknowledged since the
        last write. Cheap when nothing is due: the MQTT thread calls it every
        step. True when it wrote."""
        with self._lock:
            if self._file is None:
                return False
            now = self._monotonic()
            first = self._fresh.first_since()
            due = first is not None and now - first >= self._write_delay_s
            if not due and not (self._gone and now - self._last_write >= self._write_delay_s):
                return False
            self._write_fresh()
            return True

    def pending(self, limit: int, after_row_id: int = 0) -> list[Spooled]:
        """Up to ``limit`` rows with row_id > ``after_row_id``, oldest first."""
        with self._lock:
            found: list[Spooled] = []
            if self._file is not None and self._file_rows:
                found = self._run(
                    "read", [], self._file.rows_after, after_row_id, limit, self._gone
                )
            for row in self._fresh:
                if len(found) >= limit:
                    break
                if row.row_id > after_row_id:
                    found.append(row)
            return found

    def ack(self, row_id: int) -> None:
        """Forget a row the broker acknowledged; an unknown (or dropped) row_id is a no-op."""
        self.ack_many([row_id])

    def ack_many(self, row_ids: Sequence[int]) -> None:
        """``ack`` for several rows: a busy link acknowledges thousands of
        messages a second. Rows on file are deleted with the next write."""
        if not row_ids:
            return
        with self._lock:
            on_file = [row_id for row_id in row_ids if not self._fresh.forget(row_id)]
            if on_file and self._file is not None and self._file_rows:
                for row_id, size in self._run("ack", [], self._file.sizes, on_file):
                    self._gone_from_file(row_id, size)
                if self._file is None:
                    for row_id in on_file:
                        self._fresh.forget(row_id)

    def stats(self) -> SpoolStats:
        with self._lock:
            oldest = self._oldest()
            return SpoolStats(
                self._row_count,
                self._byte_count,
                oldest.created_at if oldest else None,
                dict(self._dropped),
                self._degraded,
            )

    def take_drops(self) -> dict[str, int]:
        """Drops per kind since the previous call, for one "spool dropped" event once the link
        is back; {} if none."""
        with self._lock:
            drops, self._untaken = dict(self._untaken), Counter()
            return drops

    def close(self) -> None:
        """Write what is unacknowledged and mark the file clean, so the next
        run continues this epoch and its seqs."""
        with self._lock:
            self._write_fresh()
            spool_file, self._file = self._file, None
            if spool_file is None:
                return
            try:
                spool_file.close(dict(self._seqs))
            except (sqlite3.Error, OSError) as exc:
                log.error("spool '%s': closing failed: %s", self._path, exc)

    # -- under the lock ------------------------------------------------------------

    def _open(self, path: Path) -> None:
        spool_file = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            spool_file = SpoolFile(path, self._max_bytes)
            self._last_row_id, self._file_rows, self._file_bytes = spool_file.totals()
            self._file = spool_file
            self.epoch, self._seqs = spool_file.claim()
        except (sqlite3.Error, OSError) as exc:
            self._file = spool_file
            self._degrade("open", exc)

    def _gone_from_file(self, row_id: int, size: int) -> None:
        if row_id not in self._gone:
            self._gone.add(row_id)
            self._file_rows -= 1
            self._file_bytes -= size

    def _forget_topic(self, kind: str, topic: str) -> None:
        """The file first: rows a failing disk hands back to memory are forgotten there too."""
        if self._file is not None and self._file_rows:
            for row_id, size in self._run("read", [], self._file.rows_of, kind, topic):
                self._gone_from_file(row_id, size)
        for row in self._fresh.of_topic(kind, topic):
            self._fresh.forget(row.row_id)

    def _evict(self, need: int) -> Counter[str]:
        """Drop at least ``need`` bytes, oldest first within each kind of
        ``DROP_ORDER`` (rows on file are older than those in memory)."""
        drops: Counter[str] = Counter()
        freed = 0
        for kind in DROP_ORDER:
            if freed >= need:
                break
            if self._file is not None and self._file_rows:
                victims = self._run(
                    "read", [], self._file.oldest_of, kind, need - freed, self._gone
                )
                for row_id, size in victims:
                    self._gone_from_file(row_id, size)
                    freed += size
                drops[kind] += len(victims)
            while freed < need and (row := self._fresh.oldest_of(kind)) is not None:
                freed += row.size
                self._fresh.forget(row.row_id)
                drops[kind] += 1
        return +drops

    def _write_fresh(self) -> None:
        """The rows gone deleted, then every row in memory written in one
        transaction; when the file's cap is the limit, the oldest rows by
        ``DROP_ORDER`` are dropped (counted) until they fit."""
        if self._file is None or not (self._fresh or self._gone):
            return
        need = max(self._fresh.bytes, self._max_bytes // 20)
        for _ in range(FULL_FILE_RETRIES):
            if self._gone:
                deleted = set(self._gone)
                self._run("write", None, self._file.delete, deleted)
                if self._file is None:  # degraded: all of it is in memory now
                    return
                self._gone -= deleted
            rows = list(self._fresh)
            if not rows:
                break
            try:
                self._run("write", None, self._file.insert, rows)
            except FileFull:
                self._count_drops(self._evict(need))
                need *= 2
                continue
            if self._file is None:
                return
            for row in rows:
                self._fresh.forget(row.row_id)
            self._file_rows += len(rows)
            self._file_bytes += sum(row.size for row in rows)
            break
        else:
            self._degrade("write", FileFull("the spool file stays full after dropping"))
            return
        self._last_write = self._monotonic()
        if self._file is not None and not self._file_rows:
            self._run("shrink", None, self._file.shrink)

    def _oldest(self) -> Spooled | None:
        """Rows join the file above every row on it, so the oldest one left
        is never below the last one found: the search starts there."""
        if self._file is not None and self._file_rows:
            after = self._oldest_on_file - 1
            found = self._run("read", [], self._file.rows_after, after, 1, self._gone)
            if found:
                self._oldest_on_file = found[0].row_id
                return found[0]
        return self._fresh.oldest()

    def _count_drops(self, drops: Counter[str]) -> None:
        self._dropped.update(drops)
        self._untaken.update(drops)

    def _run(self, what: str, degraded_answer, op: Callable, *args):
        """``op`` on the file; if the disk fails, the spool degrades to memory
        (the file's rows move there) and ``degraded_answer`` is returned, so
        callers do the file's part first and memory's after. Misuse
        (ProgrammingError, e.g. after close) is not a disk failure and raises."""
        try:
            return op(*args)
        except sqlite3.ProgrammingError:
            raise
        except (sqlite3.Error, OSError) as exc:
            self._degrade(what, exc)
            return degraded_answer

    def _degrade(self, what: str, exc: BaseException) -> None:
        """Carry on in memory. Rows the failed file can still be read for are
        kept (ahead of those in memory), so they are sent now, and possibly
        again after a restart, with the same epoch and seq: at least once."""
        self._degraded = (
            f"spool '{self._path}': {what} failed: {type(exc).__name__}: {exc};"
            " keeping messages in memory only until restart"
        )
        log.error("%s", self._degraded)
        failed, self._file = self._file, None
        kept: list[Spooled] = []
        if failed is not None:
            try:
                kept = failed.rows_after(0, self._file_rows + len(self._gone) + 1, self._gone)
            except (sqlite3.Error, OSError):
                log.warning(
                    "spool '%s': rows already on disk stay there for the next start", self._path
                )
            try:
                failed.close(None)
            except (sqlite3.Error, OSError):
                pass
        self._gone.clear()
        self._file_rows = self._file_bytes = 0
        fresh, self._fresh = self._fresh, MemoryRows(DROP_ORDER)
        since = self._monotonic()
        for row in kept:
            self._fresh.add(row, since)
        for row, appended in fresh.entries():
            self._fresh.add(row, appended)
