"""The device's default MQTT identity: its hostname, made unique.

Images are cloned. A fleet flashed from one image shares its hostname (often
``ubuntu``), and two devices with the same device id share a client id: the
broker drops one whenever the other connects, in a loop, and both publish the
same topics. So the default device id is the hostname followed by eight hex
digits unique to the machine: from the Jetson module's serial number when
there is one (the hardware's own; a cloned image cannot copy it), else from
``/etc/machine-id``. Both are hashed with a key of edgebox's own, as
machine-id(5) asks of anything derived from it for the network.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import socket
from pathlib import Path

IDENTITY_FILES = (
    "proc/device-tree/serial-number",
    "sys/firmware/devicetree/base/serial-number",
    "etc/machine-id",
)
"""Relative to the root: the Jetson module's serial number (two places the
kernel shows it), then systemd's machine id."""
_KEY = b"edgebox mqtt device id"
_MAX_LEVEL = 64
_SUFFIX_DIGITS = 8


def machine_suffix(root: Path = Path("/")) -> str | None:
    """Eight hex digits from the first of ``IDENTITY_FILES`` that holds
    something; None when none does (then the hostname alone is the id)."""
    for relative in IDENTITY_FILES:
        try:
            text = (root / relative).read_bytes().strip(b"\0\n\t ")
        except OSError:
            continue
        if text:
            return hmac.new(_KEY, text, hashlib.sha256).hexdigest()[:_SUFFIX_DIGITS]
    return None


def hostname_topic_level(hostname: str) -> str:
    """A hostname as one topic level (``orin-07.lab`` stays as it is)."""
    level = re.sub(r"[^A-Za-z0-9_.-]", "-", hostname).strip("-._")[:_MAX_LEVEL]
    return level or "edgebox"


def device_id_from(hostname: str, suffix: str | None) -> str:
    """``orin-07-3f2a9c1b``: the hostname's level, cut to leave room for the suffix."""
    level = hostname_topic_level(hostname)
    if suffix is None:
        return level
    head = level[: _MAX_LEVEL - len(suffix) - 1].rstrip("-._") or "edgebox"
    return f"{head}-{suffix}"


@functools.cache
def default_device_id() -> str:
    """This machine's: read once, the files do not change while it runs."""
    return device_id_from(socket.gethostname(), machine_suffix())
