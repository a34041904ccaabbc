"""Wakes the MQTT thread out of its wait on the broker's socket when an event
arrives: without it a result waited for paho's select to time out (up to
``LOOP_TIMEOUT_S``, 25 ms on average), the largest share of a camera frame's
way from the daemon to a subscriber (bench/RESULTS.md, issue 26)."""

from __future__ import annotations

import os
import threading


class Waker:
    """A non-blocking pipe: any thread ``wake``s, the MQTT thread selects on
    ``fileno`` and ``drain``s. A full pipe already holds a wake-up, so a
    write that would block is dropped."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False
        self._lock = threading.Lock()
        """Held to write and to close: a wake racing ``close`` must never
        write into a descriptor number the process has since reused."""

    def fileno(self) -> int:
        return self._read

    def wake(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                os.write(self._write, b"\0")
            except OSError:
                pass

    def drain(self) -> None:
        """On the MQTT thread, which alone closes it."""
        try:
            while os.read(self._read, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._read, self._write):
                try:
                    os.close(fd)
                except OSError:
                    pass
