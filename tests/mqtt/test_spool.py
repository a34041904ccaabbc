"""The MQTT spool: order, epoch and seq, cap and drops, what reaches the
disk and when, crash survival, and the memory-only fallback."""

from __future__ import annotations

import json
import random
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


class FakeFailingDiskConnection:
    """Wraps a real sqlite connection; every write fails the way a broken disk does."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.lstrip().upper().startswith(("INSERT", "DELETE")):
            raise sqlite3.OperationalError("disk I/O error")
        return self.real.execute(sql, *args)

    def executemany(self, sql: str, *args: object) -> sqlite3.Cursor:
        raise sqlite3.OperationalError("disk I/O error")

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def change_counter(path: Path) -> int:
    """The database header's file change counter: +1 per committed write."""
    with open(path, "rb") as file:
        return int.from_bytes(file.read(28)[24:28], "big")


def rows_on_file(path: Path) -> list[tuple[str, int]]:
    other = sqlite3.connect(path)
    try:
        return other.execute("SELECT topic, seq FROM rows ORDER BY row_id").fetchall()
    finally:
        other.close()


def identities(spool: Spool) -> list[tuple[str, str, int]]:
    """(topic, epoch, seq) of every row, as a subscriber tells messages apart."""
    found = []
    for row in spool.pending(1000):
        document = json.loads(row.payload)
        found.append((row.topic, document["epoch"], document["seq"]))
    return found


def test_seq_counts_per_topic_and_rows_keep_append_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.db", max_bytes=1 << 20, clock=lambda: 12.5)
    stored = spool.append([out("a", n=1), out("b", n=2), out("a", n=3)])
    spool.append([out("b", n=4)])

    assert [(s.topic, s.seq) for s in stored] == [("a", 1), ("b", 1), ("a", 2)]
    assert topics_and_seqs(spool) == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    first = spool.pending(1)[0]
    assert first.payload == b'{"n":1,"seq":1,"epoch":"%s"}' % spool.epoch.encode()
    assert len(spool.epoch) == 16
    assert (first.qos, first.retain, first.kind, first.created_at) == (1, False, "event", 12.5)
    assert spool.stats().rows == 4


def test_epoch_and_seq_continue_after_a_clean_close(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)
    for row in spool.append([out("a"), out("a")]):
        spool.ack(row.row_id)
    assert spool.pending(10) == []
    spool.close()

    reopened = Spool(path, max_bytes=1 << 20)
    assert reopened.epoch == spool.epoch
    assert [s.seq for s in reopened.append([out("a"), out("b")])] == [3, 1]


def test_a_run_that_did_not_close_cleanly_leaves_the_next_one_a_new_epoch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spool.db"
    first = Spool(path, max_bytes=1 << 20, write_delay_s=1.0)
    first.append([out("a"), out("a")])
    second = Spool(path, max_bytes=1 << 20)
    assert second.epoch != first.epoch
    assert [s.seq for s in second.append([out("a")])] == [1]
    del first


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
    old_epoch = json.loads(rows[3].payload)["epoch"]
    assert json.loads(rows[3].payload) == {"n": 2, "seq": 3, "epoch": old_epoch}
    new = spool.append([out("edgebox/x/events")])[0]
    assert (json.loads(new.payload)["epoch"], new.seq) == (spool.epoch, 1)
    assert spool.epoch != old_epoch


def test_kill_9_loses_only_what_waited_less_than_the_write_delay(tmp_path: Path) -> None:
    """What the broker had not acknowledged and the delay had not written yet
    is lost; the new epoch after the restart is how subscribers learn of it."""
    path = tmp_path / "spool.db"
    child = textwrap.dedent(f"""
        import os
        from edgebox.mqtt.spool import Outgoing, Spool
        now = [0.0]
        spool = Spool({str(path)!r}, 1 << 20, write_delay_s=1.0, monotonic=lambda: now[0])
        spool.append([Outgoing("e", {{"n": n}}, "event") for n in range(3)])
        now[0] = 1.0
        assert spool.flush_due()
        spool.append([Outgoing("e", {{"n": 3}}, "event")])
        now[0] = 1.9
        assert not spool.flush_due()
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", child], cwd=REPO_ROOT, check=True, timeout=60)

    spool = Spool(path, max_bytes=1 << 20)
    assert topics_and_seqs(spool) == [("e", 1), ("e", 2), ("e", 3)]
    (old_epoch,) = {epoch for _, epoch, _ in identities(spool)}
    assert spool.epoch != old_epoch


def test_rows_written_survive_a_spool_that_was_never_closed(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    first = Spool(path, max_bytes=1 << 20)
    first.append([out("a", n=1), out("a", n=2)])
    second = Spool(path, max_bytes=1 << 20)
    assert topics_and_seqs(second) == [("a", 1), ("a", 2)]
    del first


def test_rows_acknowledged_within_the_write_delay_never_touch_the_disk(tmp_path: Path) -> None:
    """A healthy link: the broker acknowledges in milliseconds, so nothing is written."""
    path = tmp_path / "spool.db"
    clock = FakeClock()
    spool = Spool(path, max_bytes=1 << 20, write_delay_s=1.0, monotonic=clock)
    before = change_counter(path)
    for step in range(50):
        rows = spool.append([out("r", "result", n=step), out("e")])
        clock.now += 0.1
        spool.ack_many([row.row_id for row in rows])
        assert not spool.flush_due()
    spool.append([out("r", "result", n=50)])
    spool.ack_many([row.row_id for row in spool.pending(10)])
    clock.now += 5.0
    assert not spool.flush_due()
    assert change_counter(path) == before
    assert spool.stats().rows == 0


def test_what_waits_past_the_delay_is_written_in_one_transaction_then_deleted_in_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spool.db"
    clock = FakeClock()
    spool = Spool(path, max_bytes=1 << 20, write_delay_s=1.0, monotonic=clock)
    before = change_counter(path)
    first = spool.append([out("e", n=1)])[0]
    clock.now += 0.5
    spool.append([out("e", n=2), out("r", "result")])
    clock.now += 0.49
    assert not spool.flush_due()
    assert rows_on_file(path) == []
    clock.now += 0.01
    assert spool.flush_due()
    assert rows_on_file(path) == [("e", 1), ("e", 2), ("r", 1)]
    assert change_counter(path) == before + 1

    spool.ack_many([row.row_id for row in spool.pending(10)])
    assert spool.stats().rows == 0
    assert spool.pending(10) == []
    assert rows_on_file(path) == [("e", 1), ("e", 2), ("r", 1)]
    clock.now += 0.5
    assert not spool.flush_due()
    clock.now += 0.5
    assert spool.flush_due()
    assert rows_on_file(path) == []
    assert change_counter(path) == before + 2
    assert first.row_id not in {row.row_id for row in spool.pending(10)}


def test_close_writes_what_is_unacknowledged_for_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20, write_delay_s=60.0)
    rows = spool.append([out("e", n=n) for n in range(3)])
    spool.ack(rows[0].row_id)
    spool.close()
    reopened = Spool(path, max_bytes=1 << 20)
    assert identities(reopened) == [("e", spool.epoch, 2), ("e", spool.epoch, 3)]


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
    spool._file.conn = FakeFailingDiskConnection(spool._file.conn)  # type: ignore[union-attr]

    stored = spool.append([out("a", n=3), out("b")])

    assert spool.degraded == (
        f"spool '{path}': write failed: OperationalError: disk I/O error; "
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


def test_seqs_never_repeat_after_the_disk_failed_mid_run(tmp_path: Path) -> None:
    """Issue 19: a degraded spool handed out seqs it could not keep on disk,
    and after a restart the same seqs named different messages."""
    path = tmp_path / "spool.db"
    seen: dict[tuple[str, str, int], bytes] = {}

    def remember(spool: Spool) -> None:
        for row in spool.pending(1000):
            document = json.loads(row.payload)
            identity = (row.topic, document["epoch"], document["seq"])
            assert seen.setdefault(identity, row.payload) == row.payload, identity
            spool.ack(row.row_id)

    first = Spool(path, max_bytes=1 << 20)
    first.append([out("a", n=1), out("a", n=2)])
    remember(first)
    first.close()

    second = Spool(path, max_bytes=1 << 20)
    second._file.conn = FakeFailingDiskConnection(second._file.conn)  # type: ignore[union-attr]
    second.append([out("a", n=3), out("a", n=4), out("a", n=5)])
    assert second.degraded is not None
    remember(second)
    second.close()

    third = Spool(path, max_bytes=1 << 20)
    assert third.degraded is None
    third.append([out("a", n=6), out("a", n=7), out("a", n=8)])
    remember(third)
    assert len(seen) == 8
    assert len({epoch for _, epoch, _ in seen}) == 2


def test_seqs_never_repeat_after_a_run_on_a_read_only_disk(small_filesystem) -> None:
    """The disk turns read-only between runs (a real tmpfs remounted): that
    run cannot mark the file, so it takes an epoch of its own."""
    disk = small_filesystem(1 << 20)
    path = disk.path / "spool.db"
    first = Spool(path, max_bytes=1 << 20)
    first.append([out("a", n=1)])
    kept_epoch = first.epoch
    first.close()

    disk.remount("ro")
    second = Spool(path, max_bytes=1 << 20)
    assert second.degraded is not None and "readonly" in second.degraded.replace("-", "")
    assert second.epoch != kept_epoch
    assert identities(second) == [("a", kept_epoch, 1)]
    second.append([out("a", n=2)])
    assert identities(second)[1] == ("a", second.epoch, 1)
    second.close()

    disk.remount("rw")
    third = Spool(path, max_bytes=1 << 20)
    assert third.degraded is None
    assert third.epoch == kept_epoch
    assert third.append([out("a", n=3)])[0].seq == 2
    assert third.epoch != second.epoch


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


def test_file_has_a_rollback_journal_every_commit_synced_and_no_secure_delete(
    tmp_path: Path,
) -> None:
    """A power cut can only be simulated by trusting these settings, so they
    are pinned; secure_delete (on in Debian's SQLite) would zero every
    acknowledged row on the flash."""
    path = tmp_path / "spool.db"
    spool = Spool(path, max_bytes=1 << 20)
    conn = spool._file.conn  # type: ignore[union-attr]
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("truncate",)
    assert conn.execute("PRAGMA secure_delete").fetchone() == (0,)


def test_a_wal_spool_of_the_previous_release_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.executescript(
        "CREATE TABLE rows (row_id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT "
        "NULL, qos INTEGER NOT NULL, retain INTEGER NOT NULL, kind TEXT NOT NULL, seq INTEGER "
        "NOT NULL, created_at REAL NOT NULL, size INTEGER NOT NULL);"
        "CREATE INDEX rows_by_topic ON rows (topic, row_id);"
        "CREATE TABLE counters (topic TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);"
        "INSERT INTO rows VALUES (7, 'e', CAST('{\"seq\":41}' AS BLOB), 1, 0, 'event', 41, 1, 12);"
        "INSERT INTO counters VALUES ('e', 41);"
    )
    old.close()

    spool = Spool(path, max_bytes=1 << 20)
    assert spool.degraded is None
    assert [(row.row_id, row.seq) for row in spool.pending(10)] == [(7, 41)]
    assert spool.append([out("e")])[0].seq == 1
    assert not Path(f"{path}-wal").exists()


def test_ack_many_deletes_the_acknowledged_rows_and_their_bytes(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.sqlite", 1 << 20)
    rows = spool.append([out("t", n=index) for index in range(5)])
    spool.ack_many([rows[1].row_id, rows[3].row_id, 999])
    left = spool.pending(10)
    assert [r.row_id for r in left] == [rows[0].row_id, rows[2].row_id, rows[4].row_id]
    assert spool.stats().rows == 3
    assert spool.stats().bytes == sum(len(r.topic) + len(r.payload) for r in left)
    spool.close()


def lane_sized(index: int) -> Outgoing:
    return out("edgebox/d/streams/road/results", "result", i=index, lanes="x" * 3500)


@pytest.mark.parametrize("write_delay_s", [0.0, 1.0])
def test_files_stay_within_the_cap_on_a_disk_exactly_that_big(small_filesystem, write_delay_s):
    """Issue 19: the WAL alone outgrew a 2 MB filesystem. Here the disk is as
    big as the cap, so any file (journal included) past it fails for real,
    through outages that fill the spool, drains and acks."""
    cap = 512 * 1024
    disk = small_filesystem(cap)
    clock = FakeClock()
    sizes = random.Random(19)
    spool = Spool(disk.path / "spool.db", cap, write_delay_s=write_delay_s, monotonic=clock)
    index = 0
    for _outage in range(3):
        for _ in range(250):
            spool.append(
                [
                    lane_sized(index),
                    out("e", n=index),
                    out("t", "telemetry", blob="y" * sizes.randrange(10, 6000)),
                ]
                + [out("e", n=n) for n in range(sizes.randrange(0, 40))]
            )
            index += 1
            clock.now += 0.25
            spool.flush_due()
            assert spool.degraded is None
            assert disk.used_bytes() <= cap
        assert spool.take_drops()["result"] > 0
        while rows := spool.pending(20):
            spool.ack_many([row.row_id for row in rows])
            clock.now += 0.05
            spool.flush_due()
            assert spool.degraded is None
        clock.now += write_delay_s
        spool.flush_due()
        assert spool.stats().rows == 0
    spool.close()
    assert Path(f"{disk.path}/spool.db").stat().st_size < cap // 4
