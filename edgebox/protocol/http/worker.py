"""What one HTTP worker thread owns: its read buffer, and the socket pair
through which the I/O thread cuts its linger short (``HttpServer``'s module
docstring says why workers linger). The server makes one per worker thread;
the worker's connection reads into ``chunk`` while it lingers.
"""

from __future__ import annotations

import socket

READ_CHUNK_BYTES = 65536
"""What one ``recv`` reads when the bytes are not a body's (those go straight
into the body's own buffer)."""


class Worker:
    """Used by its own thread alone, except ``nudge``, which the I/O thread
    calls."""

    def __init__(self) -> None:
        self.chunk = memoryview(bytearray(READ_CHUNK_BYTES))
        self.nudge_r, self.nudge_w = socket.socketpair()
        self.nudge_r.setblocking(False)
        self.nudge_w.setblocking(False)

    def nudge(self) -> None:
        try:
            self.nudge_w.send(b"\0")
        except OSError:
            pass  # a nudge is already pending, or the worker has gone

    def clear_nudges(self) -> None:
        try:
            while self.nudge_r.recv(64):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.nudge_r.close()
        self.nudge_w.close()
