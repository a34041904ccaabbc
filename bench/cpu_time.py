"""CPU seconds a process has used so far, from ``/proc/<pid>/stat`` (Linux, as
the daemon's targets are). Per-request CPU shows where the cores go when
latency alone cannot: on a two-core machine the client, the daemon and ONNX
Runtime's worker threads all compete for the same cores."""

from __future__ import annotations

import os

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int) -> float | None:
    """User plus system time of ``pid`` (all its threads), or None where
    ``/proc`` cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S
