"""glibc's allocator kept from handing camera-frame-sized buffers back to the
kernel after every request.

A request carrying a frame allocates several buffers of megabytes (gRPC's
message, protobuf's arena, the tensors). Past glibc's mmap threshold each is
a fresh ``mmap`` whose pages fault in one by one and are zeroed, then
``munmap``'d at free, and a heap top past the trim threshold goes back to the
kernel the same way; glibc's adaptive thresholds did not catch up with the
daemon's threads. On the lane detector's 2.7 MB in / 0.8 MB out over gRPC
that was about 1,500 page faults and 40% of the server's CPU per request
(bench/RESULTS.md, issue 25). Raising both limits once at start keeps such
buffers in the heap for reuse; memory still returns to the kernel past the
trim threshold, so a burst does not pin its peak forever. Two arenas instead
of glibc's eight per core keep the threads from each holding their own
frames: with them the daemon's RSS after lane traffic came out below the
untuned one's (179 against 213 MB).

A variable the operator set (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_ARENA_MAX``, or any of them in
``GLIBC_TUNABLES``) wins: that parameter is left alone. Anything but glibc
(musl, say) is left alone too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
"""mallopt's parameter numbers (malloc.h)."""
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""glibc's own ceiling for its adaptive threshold (DEFAULT_MMAP_THRESHOLD_MAX
on 64-bit): buffers up to a 4K frame's stay in the heap."""
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Free heap top kept before it is returned: several frames' worth of buffers."""

ARENA_MAX = 2
"""Heaps the threads share. Each arena keeps its own free buffers, so with
glibc's default (8 per core) every worker thread would hold its own frames'
worth; the GIL serialises most allocations anyway."""

_PARAMETERS = {
    "mmap_threshold": (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_"),
    "trim_threshold": (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES, "MALLOC_TRIM_THRESHOLD_"),
    "arena_max": (M_ARENA_MAX, ARENA_MAX, "MALLOC_ARENA_MAX"),
}


def operator_set(name: str, variable: str, environ: dict[str, str]) -> bool:
    """Whether the environment already sets this parameter for glibc."""
    return variable in environ or f"glibc.malloc.{name}=" in environ.get("GLIBC_TUNABLES", "")


def tune_malloc(environ: dict[str, str] | None = None, libc: object | None = None) -> list[str]:
    """Raise the thresholds this process's glibc allocator uses; returns the
    parameters set (none off glibc). ``libc``: a stand-in for tests."""
    environ = dict(os.environ) if environ is None else environ
    if libc is None:
        if not hasattr(os, "confstr") or "glibc" not in (_confstr("CS_GNU_LIBC_VERSION") or ""):
            return []
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    done = []
    for name, (parameter, value, variable) in _PARAMETERS.items():
        if operator_set(name, variable, environ):
            continue
        if libc.mallopt(ctypes.c_int(parameter), ctypes.c_int(value)) == 1:
            done.append(name)
        else:
            log.warning("malloc: mallopt(%s, %d) refused; left at glibc's default", name, value)
    return done


def _confstr(name: str) -> str | None:
    try:
        return os.confstr(name)
    except (ValueError, OSError):
        return None
