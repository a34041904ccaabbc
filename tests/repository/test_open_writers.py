"""The kernel says whether a copy is still writing a file, however long it paused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgebox.repository import open_writers
from edgebox.repository.open_writers import being_written, open_for_writing

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file leases are Linux-only")


def test_a_file_open_for_writing_is_reported_until_closed(tmp_path):
    target = tmp_path / "model.onnx"
    with open(target, "wb") as copy:
        copy.write(b"half of it")
        copy.flush()
        assert open_for_writing(target) is True
    assert open_for_writing(target) is False


def test_readers_do_not_count(tmp_path):
    target = tmp_path / "model.onnx"
    target.write_bytes(b"complete")
    with open(target, "rb"):
        assert open_for_writing(target) is False


def test_a_writer_in_another_process_is_seen(tmp_path):
    target = tmp_path / "model.onnx"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; f = open({str(target)!r}, 'wb'); f.write(b'x'); f.flush(); print('open', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "open"
        assert open_for_writing(target) is True
    finally:
        writer.stdin.close()
        writer.wait(10)
    assert open_for_writing(target) is False


def test_a_folder_is_being_written_if_any_file_below_it_is(tmp_path):
    (tmp_path / "1" / "assets").mkdir(parents=True)
    (tmp_path / "1" / "config.json").write_text("{}")
    with open(tmp_path / "1" / "assets" / "weights.bin", "wb") as copy:
        copy.write(b"w")
        copy.flush()
        assert being_written(tmp_path / "1") is True
    assert being_written(tmp_path / "1") is False


def test_without_leases_the_answer_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(open_writers, "_F_SETLEASE", None)
    (tmp_path / "model.onnx").write_bytes(b"x")
    assert open_for_writing(tmp_path / "model.onnx") is None
    assert being_written(tmp_path) is None
