"""One daemon per state directory, held by an advisory lock for the
process's life.

Two daemons on one state directory read each other's live crash marks as a
dead run's and quarantine sound versions, and overwrite each other's
rollout record, history and fleet state. An ``edgebox serve`` started by
hand while the service runs is the usual way there; it must stop at once,
naming the holder, instead. The lock is the kernel's (``flock``), so a
daemon that dies for any reason releases it, and no stale file has to be
judged."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "edgebox.lock"


class StateDirectoryInUse(RuntimeError):
    """Another process holds the directory's lock; the message names it."""


class StateLock:
    """Held until ``release`` or the process ends."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self.path = path

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def hold_state_directory(directory: Path) -> StateLock:
    """Lock ``directory`` (made if missing) for this process. Raises
    ``StateDirectoryInUse`` when another process holds it, and OSError when
    the directory or its lock file cannot be made (``open_state`` then logs
    the directory as unusable; nothing is shared through it)."""
    directory.mkdir(mode=0o750, parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        os.close(fd)
        raise StateDirectoryInUse(
            f"state directory '{directory}' is in use by another edgebox"
            f"{f' (pid {holder})' if holder.isdigit() else ''}: stop it first, or give this "
            "one a state directory of its own (--state-directory DIR)"
        ) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return StateLock(fd, path)
