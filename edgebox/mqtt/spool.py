"""Store and forward for MQTT (issue 11): a message is committed to SQLite before ``append``
returns, and leaves only through ``ack``, once the broker acknowledged it. So a broker outage, a
``kill -9`` or a power cut loses nothing that was appended; delivery is at least once and a re-sent
row keeps its ``seq``.

A full or read-only disk, or a corrupt database, never raises: the spool carries on in memory
with the same order, seq, cap and drop counts, and says why in ``degraded``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DROP_ORDER = ("result", "telemetry", "event", "status")
"""Kinds in the order the cap drops them: status and events are what an operator needs after an
outage; per-frame results are the bulk and the least missed."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    row_id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT NULL, qos INTEGER NOT NULL,
    retain INTEGER NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, created_at REAL NOT NULL,
    size INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rows_by_kind ON rows (kind, row_id);
CREATE INDEX IF NOT EXISTS rows_by_topic ON rows (topic, row_id);
CREATE TABLE IF NOT EXISTS counters (topic TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
"""
_COLUMNS = "row_id, topic, payload, qos, retain, kind, seq, created_at, size"


@dataclass(frozen=True)
class Outgoing:
    """One message as the publisher hands it over; the spool adds ``"seq"`` to ``document``.
    ``replaces_unsent`` (retained status): older rows of the topic still in the spool are
    deleted first, which is not counted as a drop."""

    topic: str
    document: dict
    kind: str
    qos: int = 1
    retain: bool = False
    replaces_unsent: bool = False


@dataclass(frozen=True)
class Spooled:
    """A stored row, ready to publish as is; ``ack(row_id)`` once the broker acknowledged it."""

    row_id: int
    topic: str
    payload: bytes
    qos: int
    retain: bool
    kind: str
    seq: int
    created_at: float


@dataclass(frozen=True)
class SpoolStats:
    """``bytes`` counts topic plus payload, what the cap limits; ``dropped`` totals since start."""

    rows: int
    bytes: int
    oldest_created_at: float | None
    dropped: dict[str, int]
    degraded: str | None


class _Db:
    """One connection holding the schema; the file and the memory fallback are both this."""

    def __init__(self, target: str) -> None:
        self.conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        try:
            if target != ":memory:":
                mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(f"journal_mode is '{mode}', expected 'wal'")
                self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(_SCHEMA)
        except BaseException:
            self.conn.close()
            raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


class Spool:
    """Owned by the MQTT thread; a lock makes every method safe from other threads as well
    (they are short). Counters (seq, rows, bytes) are mirrored in memory and updated only after a
    commit, so a failed transaction retried in memory reuses exactly the same seqs."""

    def __init__(
        self, path: Path | None, max_bytes: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._path = None if path is None else Path(path)
        self._max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._degraded: str | None = None
        self._dropped: Counter[str] = Counter()
        self._untaken: Counter[str] = Counter()
        self._seqs: dict[str, int] = {}
        self._last_row_id = self._rows = self._bytes = 0
        if self._path is None:
            self._db = _Db(":memory:")
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _Db(str(self._path))
            self._seqs = dict(self._db.conn.execute("SELECT topic, last_seq FROM counters"))
            self._load_totals()
        except (sqlite3.Error, OSError) as exc:
            self._degrade("open", exc, getattr(self, "_db", None))

    @property
    def degraded(self) -> str | None:
        """Why the spool is memory-only (messages lost on restart), or None."""
        return self._degraded

    def append(self, items: Sequence[Outgoing]) -> list[Spooled]:
        """Store ``items`` in one committed transaction, then apply the cap. Returns the rows
        stored and still present, in order; an item bigger than the cap is dropped (its seq is
        used, so subscribers see the gap). Unknown kinds raise ValueError and store nothing."""
        for item in items:
            if item.kind not in DROP_ORDER:
                raise ValueError(
                    f"spool: kind '{item.kind}' of topic '{item.topic}': expected one of "
                    f"{', '.join(repr(k) for k in DROP_ORDER)}"
                )
        with self._lock:
            stored, seqs, drops, totals = self._run("append", lambda: self._append(items))
            self._seqs.update(seqs)
            self._last_row_id, self._rows, self._bytes = totals
            self._dropped.update(drops)
            self._untaken.update(drops)
            return stored

    def pending(self, limit: int, after_row_id: int = 0) -> list[Spooled]:
        """Up to ``limit`` rows with row_id > ``after_row_id``, oldest first."""
        with self._lock:
            return self._run(
                "read",
                lambda: self._select(
                    "WHERE row_id > ? ORDER BY row_id LIMIT ?", (after_row_id, limit)
                ),
            )

    def ack(self, row_id: int) -> None:
        """Delete a row the broker acknowledged; an unknown (or dropped) row_id is a no-op."""
        self.ack_many([row_id])

    def ack_many(self, row_ids: Sequence[int]) -> None:
        """``ack`` for several rows in one transaction: a busy link acknowledges
        thousands of messages a second, and one commit each would cost a sync
        each."""
        if not row_ids:
            return
        with self._lock:
            self._run("ack", lambda: self._ack(list(row_ids)))

    def stats(self) -> SpoolStats:
        with self._lock:
            oldest = self._run("read", lambda: self._select("ORDER BY row_id LIMIT 1", ()))
            return SpoolStats(
                self._rows,
                self._bytes,
                oldest[0].created_at if oldest else None,
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
        with self._lock:
            self._db.conn.close()

    def _run(self, what: str, op: Callable):
        """Run ``op`` on the current store; if the file fails, once, degrade and run it again in
        memory. Misuse (ProgrammingError, e.g. after close) is not a disk failure and raises."""
        try:
            return op()
        except (sqlite3.Error, OSError) as exc:
            if self._degraded or self._path is None or isinstance(exc, sqlite3.ProgrammingError):
                raise
            self._degrade(what, exc, self._db)
            return op()

    def _append(self, items: Sequence[Outgoing]):
        conn, now = self._db.conn, self._clock()
        seqs: dict[str, int] = {}
        stored: list[Spooled] = []
        drops: Counter[str] = Counter()
        row_id, rows, nbytes = self._last_row_id, self._rows, self._bytes
        with self._db.transaction():
            for item in items:
                seq = seqs[item.topic] = seqs.get(item.topic, self._seqs.get(item.topic, 0)) + 1
                payload = json.dumps({**item.document, "seq": seq}, separators=(",", ":")).encode()
                size = len(item.topic.encode()) + len(payload)
                if item.replaces_unsent:
                    count, gone = conn.execute(
                        "SELECT count(*), coalesce(sum(size), 0) FROM rows WHERE topic = ?",
                        (item.topic,),
                    ).fetchone()
                    conn.execute("DELETE FROM rows WHERE topic = ?", (item.topic,))
                    rows, nbytes = rows - count, nbytes - gone
                    stored = [s for s in stored if s.topic != item.topic]
                if size > self._max_bytes:
                    drops[item.kind] += 1
                    continue
                row_id, rows, nbytes = row_id + 1, rows + 1, nbytes + size
                values = (row_id, item.topic, payload, item.qos, item.retain, item.kind, seq, now)
                conn.execute(
                    f"INSERT INTO rows ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, size),
                )
                stored.append(Spooled(*values))
            conn.executemany(
                "INSERT OR REPLACE INTO counters (topic, last_seq) VALUES (?, ?)",
                list(seqs.items()),
            )
            for kind in DROP_ORDER:
                if nbytes <= self._max_bytes:
                    break
                cursor = conn.execute(
                    "SELECT row_id, size FROM rows WHERE kind = ? ORDER BY row_id", (kind,)
                )
                last = None
                for candidate, size in cursor:
                    last = candidate
                    rows, nbytes, drops[kind] = rows - 1, nbytes - size, drops[kind] + 1
                    if nbytes <= self._max_bytes:
                        break
                cursor.close()
                if last is not None:
                    conn.execute("DELETE FROM rows WHERE kind = ? AND row_id <= ?", (kind, last))
                    stored = [s for s in stored if s.kind != kind or s.row_id > last]
        return stored, seqs, drops, (row_id, rows, nbytes)

    def _select(self, where: str, args: tuple) -> list[Spooled]:
        query = f"SELECT {_COLUMNS} FROM rows {where}"
        return [_spooled(record) for record in self._db.conn.execute(query, args)]

    def _ack(self, row_ids: list[int]) -> None:
        marks = ",".join("?" * len(row_ids))
        with self._db.transaction():
            count, size = self._db.conn.execute(
                f"SELECT count(*), coalesce(sum(size), 0) FROM rows WHERE row_id IN ({marks})",
                row_ids,
            ).fetchone()
            if count:
                self._db.conn.execute(f"DELETE FROM rows WHERE row_id IN ({marks})", row_ids)
        self._rows, self._bytes = self._rows - count, self._bytes - size

    def _load_totals(self) -> None:
        last, self._rows, self._bytes = self._db.conn.execute(
            "SELECT coalesce(max(row_id), 0), count(*), coalesce(sum(size), 0) FROM rows"
        ).fetchone()
        self._last_row_id = max(self._last_row_id, last)

    def _degrade(self, what: str, exc: BaseException, failed: _Db | None) -> None:
        """Carry on in memory. Rows the failed file can still be read for are copied, so they
        are sent now (and possibly again after restart, with the same seq: at least once)."""
        self._degraded = (
            f"spool '{self._path}': {what} failed: {type(exc).__name__}: {exc};"
            " keeping messages in memory only until restart"
        )
        log.error("%s", self._degraded)
        memory = _Db(":memory:")
        if failed is not None:
            try:
                copied = failed.conn.execute(f"SELECT {_COLUMNS} FROM rows ORDER BY row_id")
                memory.conn.executemany(
                    f"INSERT INTO rows ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", copied
                )
            except (sqlite3.Error, OSError):
                log.warning(
                    "spool '%s': rows already on disk stay there for the next start", self._path
                )
            try:
                failed.conn.close()
            except (sqlite3.Error, OSError):
                pass
        self._db = memory
        self._load_totals()


def _spooled(record: tuple) -> Spooled:
    row_id, topic, payload, qos, retain, kind, seq, created_at, _size = record
    return Spooled(row_id, topic, payload, qos, bool(retain), kind, seq, created_at)
