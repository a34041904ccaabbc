"""Blueprint ``alerts_api``: ``GET /api/v1/alerts``, the active alerts the
banner on every page shows (docs/dashboard.md, "Alerts"). Read-only, so the
access rules are those of every other read: a login, or ``anonymous_read``."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from edgebox.dashboard.state import state

alerts_api = Blueprint("alerts_api", __name__, url_prefix="/api/v1")


@alerts_api.get("/alerts")
def alerts() -> Response:
    """``{"alerts": [...], "enabled": bool}``, critical first, then oldest
    first; ``enabled`` false when the daemon judges no alerts."""
    source = state().deps.alerts
    if source is None:
        return jsonify(alerts=[], enabled=False)
    return jsonify(alerts=[alert.as_dict() for alert in source.snapshot()], enabled=True)
