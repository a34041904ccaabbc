"""Whether some process still has a file open for writing, asked of the kernel.

Sizes and times cannot tell a copy that paused (a slow link, a stalled scp)
from one that finished: both look unchanged across polls. The kernel knows:
Linux grants a read lease (``fcntl F_SETLEASE F_RDLCK``) on a file only while
no process has it open for writing, and refuses with EAGAIN otherwise. The
lease is released at once; it is a question, not a lock.

Leases need the caller to own the file or hold CAP_LEASE (the systemd unit
grants it). Where neither holds, or on filesystems without leases, the answer
is "unknown" and the poller relies on sizes and times alone.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

_CANNOT_TELL = (errno.EACCES, errno.EPERM, errno.EINVAL, errno.ENOLCK, errno.EBADF)
_F_SETLEASE = getattr(fcntl, "F_SETLEASE", None)


def open_for_writing(path: Path) -> bool | None:
    """True while a process has ``path`` open for writing, False when none has,
    None when this process cannot tell."""
    if _F_SETLEASE is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            return True
        if exc.errno in _CANNOT_TELL:
            return None
        raise
    else:
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)


def being_written(path: Path) -> bool | None:
    """For a file or a folder (every file below it): True if any file is open
    for writing, False if none is, None if some could not be checked."""
    if path.is_file():
        return open_for_writing(path)
    unknown = False
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for filename in filenames:
            answer = open_for_writing(Path(dirpath) / filename)
            if answer:
                return True
            unknown |= answer is None
    return None if unknown else False
