"""Wakes the MQTT thread out of its wait on the broker's socket when an event
arrives: without it a result waited for paho's select to time out (up to
``LOOP_TIMEOUT_S``, 25 ms on average), the largest share of a camera frame's
way from the daemon to a subscriber (bench/RESULTS.md, issue 26).

Waking a sleeping thread costs the thread that wakes it a system call and,
on a loaded machine, its turn at the GIL: a few microseconds at the median
and milliseconds at worst, on the inference or request thread that
published. So the MQTT thread is woken only when it sleeps idle (``arm``):
while events flow it polls on a short timeout instead, and publishers pay
nothing (``forwarder``'s ``BUSY_WINDOW_S``)."""

from __future__ import annotations

import os
import threading


class Waker:
    """A non-blocking pipe: any thread ``wake``s, the MQTT thread selects on
    ``fileno`` and ``drain``s. A full pipe already holds a wake-up, so a
    write that would block is dropped.

    The MQTT thread arms, then looks at its queue, then sleeps; a publisher
    queues, then wakes. Under the GIL one of the two always sees the other,
    so no event sleeps through an idle wait."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False
        self.armed = False
        """Set by the MQTT thread before an idle sleep; the first ``wake``
        clears it, so one sleep costs publishers one write at most."""
        self._lock = threading.Lock()
        """Held to write and to close: a wake racing ``close`` must never
        write into a descriptor number the process has since reused."""

    def fileno(self) -> int:
        return self._read

    def arm(self) -> None:
        self.armed = True

    def disarm(self) -> None:
        self.armed = False

    def wake(self) -> None:
        """Any thread. Only an attribute read unless the MQTT thread is asleep."""
        if not self.armed:
            return
        self.armed = False
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
