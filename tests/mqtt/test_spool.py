"""The MQTT spool: order, seq, cap and drops, crash survival, and the memory-only fallback."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from edgebox.mqtt.spool import Outgoing, Spool

REPO_ROOT = Path(__file__).resolve().parents[2]


def out(topic: str, kind: str = "event", **document: object) -> Outgoing:
    return Outgoing(topic=topic, document=dict(document), kind=kind)


def topics_and_seqs(spool: Spool) -> list[tuple[str, int]]:
    return [(row.topic, row.seq) for row in spool.pending(100)]


class FakeFullDiskConnection:
    """Wraps a real sqlite connection; every write fails the way a full disk does."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.lstrip().upper().startswith(("INSERT", "DELETE")):
            raise sqlite3.OperationalError("disk I/O error")
        return self.real.execute(sql, *args)

    def executemany(self, sql: str, *args: object) -> sqlite3.Cursor:
        raise sqlite3.OperationalError("disk I/O error")

    def close(self) -> None:
        self.real.close()


def test_seq_counts_per_topic_and_rows_keep_append_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.db", max_bytes=1 << 20, clock=lambda: 12.5)
    stored = spool.append([out("a", n=1), out("b", n=2), out("a", n=3)])
    spool.append([out("b", n=4)])

    assert [(s.topic, s.seq) for s in stored] == [("a", 1), ("b", 1), ("a", 2)]
    assert topics_and_seqs(spool) == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    first = spool.pending(1)[0]
    assert first.payload == b'{"n":1,"seq":1}'
    assert (first.qos, first.retain, first.kind, first.created_at) == (1, False, "event", 12.5)
    assert spool.stats().rows == 4


def test_seq_survives_ack_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)
    for row in spool.append([out("a"), out("a")]):
        spool.ack(row.row_id)
    assert spool.pending(10) == []
    spool.close()

    reopened = Spool(path, max_bytes=1 << 20)
    assert [s.seq for s in reopened.append([out("a"), out("b")])] == [3, 1]


def test_rows_appended_before_kill_9_are_there_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "spool.db"
    child = textwrap.dedent(f"""
        import os
        from edgebox.mqtt.spool import Outgoing, Spool
        spool = Spool({str(path)!r}, max_bytes=1 << 20)
        spool.append([Outgoing("edgebox/x/status", {{"state": "ready"}}, "status", retain=True)])
        spool.append([Outgoing("edgebox/x/events", {{"n": n}}, "event") for n in range(3)])
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", child], cwd=REPO_ROOT, check=True, timeout=60)

    spool = Spool(path, max_bytes=1 << 20)
    rows = spool.pending(10)
    assert [(r.topic, r.seq, r.retain) for r in rows] == [
        ("edgebox/x/status", 1, True),
        ("edgebox/x/events", 1, False),
        ("edgebox/x/events", 2, False),
        ("edgebox/x/events", 3, False),
    ]
    assert json.loads(rows[3].payload) == {"n": 2, "seq": 3}
    assert spool.append([out("edgebox/x/events")])[0].seq == 4


def test_rows_survive_a_spool_that_was_never_closed(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    first = Spool(path, max_bytes=1 << 20)
    first.append([out("a", n=1), out("a", n=2)])
    second = Spool(path, max_bytes=1 << 20)
    assert topics_and_seqs(second) == [("a", 1), ("a", 2)]
    del first


def test_cap_drops_results_then_events_then_status_and_counts_them(tmp_path: Path) -> None:
    probe = Spool(None, max_bytes=1 << 20)
    size = sum(len(r.topic) + len(r.payload) for r in probe.append([out("s", "status")]))
    spool = Spool(tmp_path / "spool.db", max_bytes=4 * size)
    spool.append([out("s", "status"), out("e", "event"), out("r", "result"), out("r", "result")])
    assert spool.stats().bytes == 4 * size

    spool.append([out("e", "event")])
    assert topics_and_seqs(spool) == [("s", 1), ("e", 1), ("r", 2), ("e", 2)]
    spool.append([out("s", "status"), out("s", "status")])
    assert topics_and_seqs(spool) == [("s", 1), ("e", 2), ("s", 2), ("s", 3)]
    spool.append([out("s", "status")])
    assert topics_and_seqs(spool) == [("s", 1), ("s", 2), ("s", 3), ("s", 4)]
    spool.append([out("s", "status")])
    assert topics_and_seqs(spool) == [("s", 2), ("s", 3), ("s", 4), ("s", 5)]

    assert spool.take_drops() == {"result": 2, "event": 2, "status": 1}
    assert spool.take_drops() == {}
    assert spool.append([out("r", "result")]) == []
    assert topics_and_seqs(spool) == [("s", 2), ("s", 3), ("s", 4), ("s", 5)]
    assert spool.take_drops() == {"result": 1}
    stats = spool.stats()
    assert stats.dropped == {"result": 3, "event": 2, "status": 1}
    assert (stats.rows, stats.bytes) == (4, 4 * size)


def test_message_bigger_than_the_cap_is_dropped_and_counted(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.db", max_bytes=100)
    spool.append([out("r", "result")])
    stored = spool.append([out("s", "status", blob="x" * 200), out("s", "status")])
    assert [s.seq for s in stored] == [2]
    assert topics_and_seqs(spool) == [("r", 1), ("s", 2)]
    assert spool.take_drops() == {"status": 1}


def test_replaces_unsent_deletes_older_rows_of_its_topic_without_counting_drops(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool.db", max_bytes=1 << 20)
    spool.append([out("st", "status", state="loading"), out("ev"), out("st", "status")])
    latest = Outgoing("st", {"state": "ready"}, "status", retain=True, replaces_unsent=True)
    spool.append([latest])

    assert topics_and_seqs(spool) == [("ev", 1), ("st", 3)]
    assert spool.stats().dropped == {}
    assert spool.stats().rows == 2


def test_ack_of_unknown_row_is_a_no_op_and_pending_starts_after_row_id(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.db", max_bytes=1 << 20)
    rows = spool.append([out("a", n=n) for n in range(5)])
    spool.ack(10_000)
    spool.ack(rows[1].row_id)
    spool.ack(rows[1].row_id)

    after = spool.pending(2, after_row_id=rows[0].row_id)
    assert [r.seq for r in after] == [3, 4]
    assert spool.stats().rows == 4


def test_stats_report_oldest_row_and_bytes(tmp_path: Path) -> None:
    now = iter([100.0, 200.0])
    spool = Spool(tmp_path / "spool.db", max_bytes=1 << 20, clock=lambda: next(now))
    assert spool.stats().oldest_created_at is None
    first = spool.append([out("a")])[0]
    second = spool.append([out("bb")])[0]
    assert spool.stats().oldest_created_at == 100.0
    spool.ack(first.row_id)
    stats = spool.stats()
    assert (stats.oldest_created_at, stats.rows) == (200.0, 1)
    assert stats.bytes == len(b"bb") + len(second.payload)


def test_spool_whose_directory_cannot_exist_is_memory_only_with_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "afile").write_text("")
    path = tmp_path / "afile" / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)

    assert spool.degraded is not None
    assert spool.degraded.startswith(f"spool '{path}': open failed: FileExistsError: ")
    assert spool.degraded.endswith("; keeping messages in memory only until restart")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert [s.seq for s in spool.append([out("a"), out("a")])] == [1, 2]
    assert spool.stats().degraded == spool.degraded


def test_corrupt_database_is_memory_only_with_sqlite_reason(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    path.write_bytes(b"not a database, just garbage " * 200)
    spool = Spool(path, max_bytes=1 << 20)

    assert spool.degraded == (
        f"spool '{path}': open failed: DatabaseError: file is not a database; "
        "keeping messages in memory only until restart"
    )
    assert topics_and_seqs(spool) == []
    spool.append([out("a")])
    assert topics_and_seqs(spool) == [("a", 1)]


def test_disk_failing_mid_run_keeps_order_seq_and_cap_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)
    spool.append([out("a", n=1), out("a", n=2)])
    spool._db.conn = FakeFullDiskConnection(spool._db.conn)  # type: ignore[assignment]

    stored = spool.append([out("a", n=3), out("b")])

    assert spool.degraded == (
        f"spool '{path}': append failed: OperationalError: disk I/O error; "
        "keeping messages in memory only until restart"
    )
    assert [(s.topic, s.seq) for s in stored] == [("a", 3), ("b", 1)]
    assert topics_and_seqs(spool) == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    spool.ack(spool.pending(1)[0].row_id)
    spool.append([out("a")])
    assert topics_and_seqs(spool) == [("a", 2), ("a", 3), ("b", 1), ("a", 4)]
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert str(path) in caplog.records[0].getMessage()
    spool.close()

    # The file kept what it had before the failure, for the next start.
    assert topics_and_seqs(Spool(path, max_bytes=1 << 20)) == [("a", 1), ("a", 2)]


def test_memory_only_spool_keeps_the_cap(tmp_path: Path) -> None:
    spool = Spool(None, max_bytes=60)
    spool.append([out("r", "result", n=n) for n in range(10)])
    assert spool.degraded is None
    assert spool.stats().bytes <= 60
    assert [s for _, s in topics_and_seqs(spool)] == list(range(11 - spool.stats().rows, 11))
    assert spool.take_drops() == {"result": 10 - spool.stats().rows}


def test_unknown_kind_is_refused_before_anything_is_stored() -> None:
    spool = Spool(None, max_bytes=1 << 20)
    with pytest.raises(ValueError, match="spool: kind 'metrics' of topic 'a': expected one of"):
        spool.append([out("a"), out("a", "metrics")])
    assert spool.pending(10) == []


def test_file_is_wal_and_every_commit_is_synced(tmp_path: Path) -> None:
    """A power cut can only be simulated by trusting these two settings, so they are pinned."""
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)
    assert spool._db.conn.execute("PRAGMA synchronous").fetchone() == (2,)
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    other.close()


def test_ack_many_deletes_the_acknowledged_rows_and_their_bytes(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.sqlite", 1 << 20)
    rows = spool.append([out("t", n=index) for index in range(5)])
    spool.ack_many([rows[1].row_id, rows[3].row_id, 999])
    left = spool.pending(10)
    assert [r.row_id for r in left] == [rows[0].row_id, rows[2].row_id, rows[4].row_id]
    assert spool.stats().rows == 3
    assert spool.stats().bytes == sum(len(r.topic) + len(r.payload) for r in left)
    spool.close()
