"""The spool's file: the MQTT messages the broker has not acknowledged in
time, kept across restarts (``Spool`` in spool.py decides what is written
and when; this module only stores).

Flash wear decided its shape (measured in bench/RESULTS.md, issue 19):
- a rollback journal (``TRUNCATE``), not WAL: a batch of new rows is written
  once into new pages, where WAL writes every page twice (log, then
  checkpoint) and its file kept its 4 MB high-water mark past any cap;
- ``secure_delete`` off: Debian builds SQLite with it on, which zeroes every
  deleted row, so deleting an acknowledged row cost as much as writing it;
- one index (by kind, what the cap drops by), none by topic.

``max_bytes`` covers every file: the database is capped by
``max_page_count`` and the journal, truncated after every commit, holds at
most what one write touches, which ``JOURNAL_RESERVE_PAGES`` leaves room for.
A write that would pass the cap raises ``FileFull`` and changes nothing.

The file also holds the seq epoch (docs/mqtt.md, "Delivery guarantees").
Opening claims it: the epoch and each topic's last seq are taken over only
when the previous run closed the file cleanly, and the file is marked in use
before any seq of it is handed out. After a crash, a power cut or a disk that
failed mid-run, the seqs that run handed out may be on no disk, so the next
run starts a new, random epoch instead of guessing.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

JOURNAL_RESERVE_PAGES = 48
"""Of ``max_bytes``, kept for the journal, which holds the pages a transaction
changes that existed before it: a few index and interior pages when rows are
added (never the new pages), and up to one page per dozen small rows deleted,
hence ``DELETE_CHUNK``."""
DELETE_CHUNK = 128
"""Rows deleted per transaction."""
MIN_DATABASE_PAGES = 16
"""A cap smaller than this many pages plus the journal's (256 kB in all) is raised to it."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    row_id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT NULL, qos INTEGER NOT NULL,
    retain INTEGER NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, created_at REAL NOT NULL,
    size INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rows_by_kind ON rows (kind, row_id);
DROP INDEX IF EXISTS rows_by_topic;
CREATE TABLE IF NOT EXISTS counters (topic TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "row_id, topic, payload, qos, retain, kind, seq, created_at, size"
_READ_CHUNK = 1024


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

    @property
    def size(self) -> int:
        """What the cap counts: topic plus payload."""
        return len(self.topic.encode()) + len(self.payload)


class FileFull(Exception):
    """The write would take the files past ``max_bytes``; nothing was written."""


def new_epoch() -> str:
    """64 random bits: two runs that could not hand each other their seqs
    never share an epoch."""
    return secrets.token_hex(8)


class SpoolFile:
    """One connection, used under ``Spool``'s lock. Every method may raise
    ``sqlite3.Error`` or ``OSError`` (the disk's trouble); ``Spool`` then
    carries on in memory."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            self.page_size = self._prepare()
            self.max_pages = max(
                MIN_DATABASE_PAGES, max_bytes // self.page_size - JOURNAL_RESERVE_PAGES
            )
            self.conn.execute(f"PRAGMA max_page_count = {self.max_pages}")
        except BaseException:
            self.conn.close()
            raise

    def _prepare(self) -> int:
        conn = self.conn
        mode = conn.execute("PRAGMA journal_mode=TRUNCATE").fetchone()[0]
        if str(mode).lower() != "truncate":
            raise sqlite3.OperationalError(f"journal_mode is '{mode}', expected 'truncate'")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA secure_delete=OFF")
        conn.executescript(_SCHEMA)
        return conn.execute("PRAGMA page_size").fetchone()[0]

    def claim(self) -> tuple[str, dict[str, int]]:
        """The epoch and per-topic last seqs this run continues, with the
        file marked in use (committed) before the caller hands out a seq."""
        conn = self.conn
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        if meta.get("clean") == "1" and meta.get("epoch"):
            epoch = meta["epoch"]
            seqs = dict(conn.execute("SELECT topic, last_seq FROM counters"))
        else:
            epoch, seqs = new_epoch(), {}
        with self._transaction():
            if not seqs:
                conn.execute("DELETE FROM counters")
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("epoch", epoch), ("clean", "0")],
            )
        return epoch, seqs

    def totals(self) -> tuple[int, int, int]:
        """Highest row_id, rows and bytes on file."""
        return self.conn.execute(
            "SELECT coalesce(max(row_id), 0), count(*), coalesce(sum(size), 0) FROM rows"
        ).fetchone()

    def rows_after(self, row_id: int, limit: int, skip: Collection[int] = ()) -> list[Spooled]:
        """Up to ``limit`` rows above ``row_id`` in order, leaving out ``skip``.
        Reads little more than ``limit`` (the MQTT thread asks for a few rows
        above its cursor at a time), more only while ``skip`` is in the way."""
        found: list[Spooled] = []
        chunk = limit + 8
        while len(found) < limit:
            records = self.conn.execute(
                f"SELECT {_COLUMNS} FROM rows WHERE row_id > ? ORDER BY row_id LIMIT ?",
                (row_id, chunk),
            ).fetchall()
            for record in records:
                if record[0] not in skip:
                    found.append(_spooled(record))
                    if len(found) == limit:
                        break
            if len(records) < chunk:
                break
            row_id = records[-1][0]
            chunk = min(2 * chunk, _READ_CHUNK)
        return found

    def oldest_of(self, kind: str, need: int, skip: Collection[int] = ()) -> list[tuple[int, int]]:
        """``(row_id, size)`` of ``kind``'s oldest rows, leaving out ``skip``,
        until their sizes reach ``need`` (or all of them)."""
        found: list[tuple[int, int]] = []
        total, after = 0, 0
        while total < need:
            records = self.conn.execute(
                "SELECT row_id, size FROM rows WHERE kind = ? AND row_id > ? ORDER BY row_id "
                "LIMIT ?",
                (kind, after, _READ_CHUNK),
            ).fetchall()
            for row_id, size in records:
                if row_id not in skip:
                    found.append((row_id, size))
                    total += size
                    if total >= need:
                        break
            if len(records) < _READ_CHUNK:
                break
            after = records[-1][0]
        return found

    def rows_of(self, kind: str, topic: str) -> list[tuple[int, int]]:
        """``(row_id, size)`` of every row of ``topic``; by kind, which the index covers."""
        return self.conn.execute(
            "SELECT row_id, size FROM rows WHERE kind = ? AND topic = ?", (kind, topic)
        ).fetchall()

    def sizes(self, row_ids: Sequence[int]) -> list[tuple[int, int]]:
        """``(row_id, size)`` of those of ``row_ids`` on file."""
        found: list[tuple[int, int]] = []
        for start in range(0, len(row_ids), 500):
            chunk = row_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self.conn.execute(
                f"SELECT row_id, size FROM rows WHERE row_id IN ({marks})", chunk
            ).fetchall()
        return found

    def delete(self, row_ids: Collection[int]) -> None:
        """``DELETE_CHUNK`` rows a transaction, so the journal stays in its reserve."""
        ordered = sorted(row_ids)
        for start in range(0, len(ordered), DELETE_CHUNK):
            chunk = ordered[start : start + DELETE_CHUNK]
            marks = ",".join("?" * len(chunk))
            with self._transaction():
                self.conn.execute(f"DELETE FROM rows WHERE row_id IN ({marks})", chunk)

    def insert(self, rows: Sequence[Spooled]) -> None:
        """In one transaction. Raises ``FileFull`` (nothing written) when the
        cap, not the disk, is the limit."""
        try:
            with self._transaction():
                self.conn.executemany(
                    f"INSERT INTO rows ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(*_values(row), row.size) for row in rows],
                )
        except sqlite3.OperationalError as exc:
            if "full" in str(exc) and self._at_cap(rows):
                raise FileFull(str(exc)) from exc
            raise

    def close(self, seqs: dict[str, int] | None) -> None:
        """``seqs``: each topic's last seq, marking the file clean for the next
        run to continue the epoch; None (a failed disk) leaves it marked in use."""
        try:
            if seqs is not None:
                with self._transaction():
                    self.conn.execute("DELETE FROM counters")
                    self.conn.executemany(
                        "INSERT INTO counters (topic, last_seq) VALUES (?, ?)", seqs.items()
                    )
                    self.conn.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('clean', '1')"
                    )
        finally:
            self.conn.close()

    def shrink(self) -> None:
        """Give the pages of an emptied spool back to the filesystem (after an
        outage drained, the file kept its high-water mark)."""
        if self.conn.execute("PRAGMA freelist_count").fetchone()[0] > MIN_DATABASE_PAGES:
            self.conn.execute("VACUUM")

    def _at_cap(self, rows: Sequence[Spooled]) -> bool:
        """Whether a failed write was refused by ``max_page_count`` rather than
        by the filesystem: the pages it needed are more than the cap leaves."""
        pages, free = (
            self.conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count")
        )
        needed = sum(row.size + 64 for row in rows) // (self.page_size // 2) + 8
        return self.max_pages - pages + free < needed

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


def _values(row: Spooled) -> tuple:
    return (
        row.row_id,
        row.topic,
        row.payload,
        row.qos,
        row.retain,
        row.kind,
        row.seq,
        row.created_at,
    )


def _spooled(record: tuple) -> Spooled:
    row_id, topic, payload, qos, retain, kind, seq, created_at, _size = record
    return Spooled(row_id, topic, payload, qos, bool(retain), kind, seq, created_at)
