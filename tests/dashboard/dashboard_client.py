"""Helpers for the dashboard tests: the parts an app is built from, and a
test client's login and CSRF-carrying POSTs."""

from __future__ import annotations

from werkzeug.security import generate_password_hash

from edgebox.dashboard.deps import DashboardDeps

PASSWORD = "correct horse battery"
PASSWORD_HASH = generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000")
"""Few iterations: the tests log in often."""


def dashboard_deps(stack, **parts) -> DashboardDeps:
    parts.setdefault("control_mode", "explicit")
    return DashboardDeps(
        dataplane=stack.dataplane,
        repository_control=stack.repository_control,
        registry=stack.registry,
        bus=stack.bus,
        **parts,
    )


def csrf(client) -> str:
    return client.get("/api/v1/session").get_json()["csrf_token"]


def log_in(client, password: str = PASSWORD):
    """Logs ``client`` in through the JSON login; the response."""
    return client.post(
        "/login",
        json={"username": "admin", "password": password},
        headers={"X-CSRF-Token": csrf(client)},
    )


def post(client, path: str, **kwargs):
    """A POST carrying the session's current CSRF token."""
    return client.post(path, headers={"X-CSRF-Token": csrf(client)}, **kwargs)
