"""Which versions on trial were loading or running when the daemon died.

A small file, mapped into memory: each version on trial has a slot holding
its requests in flight, whether it is loading, and when it last started a
request. Updating a slot is a store into shared memory, no system call, so
the request path pays almost nothing; the kernel keeps the pages when the
process dies however it dies (SIGSEGV in a native library, ``os._exit``,
SIGKILL), and the next start reads them before it loads anything.

A reboot is not a crash of a version: the header records the kernel's boot
id, and marks from another boot are ignored (a power cut during a request
must not quarantine a good version). The kernel writes the dirty page back
now and then; only versions on trial touch it, so that is a few kilobytes
per rollout, not a steady stream onto eMMC.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

SLOTS = 64
_MAGIC = b"EBXMARK1"
_HEADER = struct.Struct("<8sI36s")
_HEADER_SIZE = 64
_SLOT = struct.Struct("<iid")
_SLOT_SIZE = 32
_SIZE = _HEADER_SIZE + SLOTS * _SLOT_SIZE


class SlotMark(NamedTuple):
    inflight: int
    loading: bool
    last_started: float


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:36]
    except OSError:
        return ""


class CrashMarks:
    """One per daemon. ``previous`` is what the last run left in slots that
    were busy, when that run died during this boot; empty otherwise."""

    def __init__(self, path: Path | None) -> None:
        self.previous: dict[int, SlotMark] = {}
        self._map: mmap.mmap | None = None
        if path is None:
            return
        try:
            self._map = _open(path)
        except OSError as exc:
            log.error("crash marks: cannot use %s: %s; crash quarantine is off", path, exc)
            return
        self.previous = _left_busy(self._map)
        self._map[:] = bytes(_SIZE)
        _HEADER.pack_into(self._map, 0, _MAGIC, os.getpid(), boot_id().encode())

    @property
    def enabled(self) -> bool:
        return self._map is not None

    def inflight(self, slot: int, count: int, started: bool) -> None:
        """Called under the version's own lock as a request enters or leaves."""
        if self._map is None:
            return
        offset = _HEADER_SIZE + slot * _SLOT_SIZE
        struct.pack_into("<i", self._map, offset, count)
        if started:
            struct.pack_into("<d", self._map, offset + 8, time.time())

    def loading(self, slot: int, busy: bool) -> None:
        if self._map is None:
            return
        offset = _HEADER_SIZE + slot * _SLOT_SIZE
        struct.pack_into("<i", self._map, offset + 4, 1 if busy else 0)
        if busy:
            struct.pack_into("<d", self._map, offset + 8, time.time())

    def clear(self, slot: int) -> None:
        if self._map is None:
            return
        offset = _HEADER_SIZE + slot * _SLOT_SIZE
        self._map[offset : offset + _SLOT_SIZE] = bytes(_SLOT_SIZE)

    def close(self) -> None:
        """A clean exit: nothing was left running."""
        if self._map is not None:
            self._map[_HEADER_SIZE:] = bytes(_SIZE - _HEADER_SIZE)
            self._map.close()
            self._map = None


def _open(path: Path) -> mmap.mmap:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if os.fstat(fd).st_size != _SIZE:
            os.ftruncate(fd, _SIZE)
        return mmap.mmap(fd, _SIZE)
    finally:
        os.close(fd)


def _left_busy(marks: mmap.mmap) -> dict[int, SlotMark]:
    magic, _pid, boot = _HEADER.unpack_from(marks, 0)
    if magic != _MAGIC:
        return {}
    if boot.rstrip(b"\0").decode(errors="replace") != boot_id():
        return {}
    busy = {}
    for slot in range(SLOTS):
        inflight, loading, started = _SLOT.unpack_from(marks, _HEADER_SIZE + slot * _SLOT_SIZE)
        if inflight > 0 or loading:
            busy[slot] = SlotMark(inflight, bool(loading), started)
    return busy


FATAL_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}


def fatal_signal(text: str) -> str:
    """The signal named in a fault handler's report (``Fatal Python error:
    Segmentation fault``), or ""."""
    for words, name in FATAL_SIGNALS.items():
        if f"Fatal Python error: {words}" in text:
            return name
    return ""
