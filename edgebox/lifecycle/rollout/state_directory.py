"""The state directory's rollout parts, opened once at start: the record of
versions (``rollout.json``), the crash marks (``marks``), and the fault
handler's report of a fatal error (``fatal.log``), read back from the last
run before this one replaces it.

Python's fault handler writes the report (which signal, every thread's
stack) when the process dies of SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL.
It goes to this file rather than stderr so that the next start knows which
signal killed the last run; the next start logs it, so the journal still
gets it, one restart late. A directory that cannot be used is logged and
the daemon serves without crash quarantine and with a record in memory.
"""

from __future__ import annotations

import faulthandler
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from edgebox.lifecycle.rollout.crash_marks import CrashMarks
from edgebox.lifecycle.rollout.store import RolloutStore

log = logging.getLogger(__name__)

MAX_FATAL_BYTES = 64 * 1024
"""The most of a fault report read back (it lists every thread's stack)."""


@dataclass
class RolloutState:
    store: RolloutStore
    marks: CrashMarks
    previous_fatal: str
    """The last run's fault report, "" if it had none."""
    fatal_file: IO[bytes] | None = None


def open_state(directory: Path | None, catch_faults: bool = False) -> RolloutState:
    """``catch_faults``: this process is the daemon (``edgebox serve``), so
    the fault handler may be pointed at the state directory; a daemon built
    inside another program (tests) leaves that program's handler alone."""
    if directory is None:
        return RolloutState(RolloutStore(None), CrashMarks(None), "")
    try:
        directory.mkdir(mode=0o750, parents=True, exist_ok=True)
    except OSError as exc:
        log.error(
            "state directory %s cannot be used (%s): rollouts are remembered in memory only "
            "and crash quarantine is off",
            directory,
            exc,
        )
        return RolloutState(RolloutStore(None), CrashMarks(None), "")
    previous, fatal_file = "", None
    if catch_faults:
        previous, fatal_file = _fault_report(directory / "fatal.log")
    if previous:
        log.error("the previous run died:\n%s", previous.rstrip())
    return RolloutState(
        RolloutStore(directory / "rollout.json"),
        CrashMarks(directory / "marks"),
        previous,
        fatal_file,
    )


def _fault_report(path: Path) -> tuple[str, IO[bytes] | None]:
    previous = ""
    try:
        with open(path, "rb") as file:
            previous = file.read(MAX_FATAL_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o640
        )
        file = os.fdopen(fd, "wb", buffering=0)
        faulthandler.enable(file=file, all_threads=True)
    except OSError as exc:
        log.warning("fatal errors go to stderr only: cannot open %s: %s", path, exc)
        return previous, None
    return previous, file
