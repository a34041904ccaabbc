"""Who did what on the dashboard, one journal line each (edgebox/audit.py),
so ``journalctl -u edgebox | grep 'Dashboard: '`` reads as a table:

    Dashboard: login ok user=admin from=10.0.0.3
    Dashboard: login refused user=admin from=10.0.0.9 reason=wrong-password
    Dashboard: unload user=admin from=10.0.0.3 model=lane result=ok
"""

from __future__ import annotations

import logging

from flask import request

from edgebox.audit import audit as audit_line

log = logging.getLogger(__name__)


def audit(action: str, user: str | None, level: int = logging.INFO, **fields: object) -> None:
    """Logs ``Dashboard: <action> user=... from=... key=value ...``, ``from``
    being the client's address (the TCP peer); call from a request."""
    audit_line(
        log, "Dashboard", action, level, user=user, **{"from": request.remote_addr}, **fields
    )
