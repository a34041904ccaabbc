"""Who changed what the device serves: one journal line per action, in
``key=value`` form, so ``journalctl -u edgebox | grep 'Repository: '`` reads
as a table and a log shipper can split it:

    Repository: load api=http from=10.0.0.3 model=lane_pipeline result=ok
    Dashboard: unload user=admin from=10.0.0.3 model=lane result=ok

A value a client chose (a model name, a user name typed) is quoted and
escaped when it holds anything but plain characters, so no client can break
a line in two or forge a field.
"""

from __future__ import annotations

import json
import logging
import re

MAX_VALUE_CHARS = 200
_PLAIN = re.compile(r"[\w.,:/@+-]+", re.ASCII)


def audit(log: logging.Logger, area: str, action: str, level: int = logging.INFO, **fields) -> None:
    """``<area>: <action> key=value ...`` on ``log``, in the order given."""
    text = " ".join(f"{key}={audit_value(value)}" for key, value in fields.items())
    log.log(level, "%s: %s %s", area, action, text)


def audit_value(value: object) -> str:
    text = "-" if value is None else str(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + "..."
    return text if _PLAIN.fullmatch(text) else json.dumps(text)
