"""Crash marks: what a process that dies mid-request leaves for the next one,
and what it does not (a clean exit, another boot)."""

from __future__ import annotations

import multiprocessing
import os
import struct

from edgebox.lifecycle.rollout.crash_marks import CrashMarks, fatal_signal


def _die_while_running(path, slot: int) -> None:
    marks = CrashMarks(path)
    marks.inflight(slot, 1, started=True)
    os._exit(3)


def test_a_process_that_dies_mid_request_leaves_its_slot_busy(tmp_path):
    path = tmp_path / "marks"
    child = multiprocessing.get_context("fork").Process(target=_die_while_running, args=(path, 5))
    child.start()
    child.join(30)
    assert child.exitcode == 3
    marks = CrashMarks(path)
    assert list(marks.previous) == [5]
    assert marks.previous[5].inflight == 1 and marks.previous[5].last_started > 0
    # Read once: the run after this one starts clean.
    assert CrashMarks(path).previous == {}


def test_a_clean_exit_leaves_nothing_to_blame(tmp_path):
    marks = CrashMarks(tmp_path / "marks")
    marks.loading(2, True)
    marks.inflight(3, 2, started=True)
    marks.close()
    assert CrashMarks(tmp_path / "marks").previous == {}


def test_marks_from_another_boot_are_ignored(tmp_path):
    path = tmp_path / "marks"
    marks = CrashMarks(path)
    marks.loading(1, True)
    with open(path, "r+b") as file:
        file.seek(12)
        file.write(struct.pack("36s", b"00000000-0000-0000-0000-000000000000"))
    assert CrashMarks(path).previous == {}


def test_an_unusable_path_turns_quarantine_off_without_failing(tmp_path):
    (tmp_path / "file").write_text("")
    marks = CrashMarks(tmp_path / "file" / "marks")
    assert not marks.enabled
    marks.inflight(0, 1, started=True)


def test_the_fault_report_names_the_signal():
    assert fatal_signal("Fatal Python error: Segmentation fault\n\nThread 0x1") == "SIGSEGV"
    assert fatal_signal("Fatal Python error: Aborted") == "SIGABRT"
    assert fatal_signal("") == ""
