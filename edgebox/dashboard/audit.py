"""Who did what on the dashboard, one journal line each, ``key=value`` so
``journalctl -u edgebox | grep 'Dashboard: '`` reads as a table and a log
shipper can split it:

    Dashboard: login ok user=admin from=10.0.0.3
    Dashboard: login refused user=admin from=10.0.0.9 reason=wrong-password
    Dashboard: unload user=admin from=10.0.0.3 model=lane result=ok

A value a client chose (the user name typed, a model name in the path) is
quoted and escaped when it holds anything but plain characters, so no client
can break a line in two or forge a field.
"""

from __future__ import annotations

import json
import logging
import re

from flask import request

log = logging.getLogger(__name__)

MAX_VALUE_CHARS = 200
_PLAIN = re.compile(r"[\w.,:/@+-]+", re.ASCII)


def audit(action: str, user: str | None, level: int = logging.INFO, **fields: object) -> None:
    """Logs ``Dashboard: <action> user=... from=... key=value ...``, ``from``
    being the client's address (the TCP peer); call from a request."""
    fields = {"user": user, "from": request.remote_addr, **fields}
    text = " ".join(f"{key}={_value(value)}" for key, value in fields.items())
    log.log(level, "Dashboard: %s %s", action, text)


def _value(value: object) -> str:
    text = "-" if value is None else str(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + "..."
    return text if _PLAIN.fullmatch(text) else json.dumps(text)
