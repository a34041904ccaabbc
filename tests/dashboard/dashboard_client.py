"""Helpers for the dashboard tests: the parts an app is built from, a test
client's login and CSRF-carrying POSTs, and the JSON API of a real daemon's
dashboard over HTTP."""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.request
from email.message import Message

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


def cookie_opener() -> urllib.request.OpenerDirector:
    """A urllib client that keeps the dashboard's session cookie."""
    return urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )


def json_request(
    opener: urllib.request.OpenerDirector,
    url: str,
    data: dict | None = None,
    token: str | None = None,
) -> tuple[int, dict, Message]:
    """A GET, or a POST of ``data`` as JSON carrying the CSRF ``token``, to a
    running dashboard: (status, JSON answer, headers), error statuses included."""
    body = json.dumps(data).encode() if data is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["X-CSRF-Token"] = token
    try:
        with opener.open(urllib.request.Request(url, body, headers), timeout=10) as reply:
            return reply.status, json.load(reply), reply.headers
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), error.headers
