"""The retained ``{prefix}/{device}/status`` documents: ``online`` with what
the device serves, ``offline`` as the last will or at a clean shutdown."""

from __future__ import annotations

from typing import Any

SCHEMA = {"name": "edgebox.status", "version": 1}


def online(identity: dict[str, Any], serving: dict[str, Any], now: float) -> dict[str, Any]:
    """``identity``: device, edgebox_version, started_at; ``serving``: models
    (name -> ready versions) and streams (name -> state), as the daemon sees
    them now."""
    return {"schema": SCHEMA, "state": "online", **identity, **serving, "timestamp": now}


def offline(identity: dict[str, Any], reason: str, now: float) -> dict[str, Any]:
    """``reason``: "connection lost" for the last will (whose timestamp is
    when the connection was opened, since the broker sends it later), or
    "shutdown"."""
    return {"schema": SCHEMA, "state": "offline", **identity, "reason": reason, "timestamp": now}
