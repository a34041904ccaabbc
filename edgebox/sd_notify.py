"""systemd's notify protocol (``Type=notify``, ``WatchdogSec=``), without a
dependency: a datagram to ``$NOTIFY_SOCKET``. Outside systemd it does nothing."""

from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send e.g. ``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``; False when not under systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True


def watchdog_interval_s() -> float | None:
    """Half the watchdog period systemd asked for, or None when there is none."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2_000_000
    except ValueError:
        return None
