"""The dashboard inside the real daemon, over HTTP with urllib: its own port
(bound to 0 and logged), a login with a password hash from the settings,
the JSON API, an unload that the v2 API then sees, and the session key kept
with mode 0600."""

from __future__ import annotations

import http.cookiejar
import json
import os
import stat
import urllib.error
import urllib.request

from werkzeug.security import generate_password_hash

from daemon_process import explicit_control
from model_fixtures import add_add_sub

PASSWORD = "e2e password"


def request(opener, url: str, data: dict | None = None, token: str | None = None):
    body = json.dumps(data).encode() if data is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["X-CSRF-Token"] = token
    try:
        with opener.open(urllib.request.Request(url, body, headers), timeout=10) as reply:
            return reply.status, json.load(reply), reply.headers
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), error.headers


def test_dashboard_in_the_daemon_logs_in_reads_and_unloads(tmp_path, start_daemon):
    repository = tmp_path / "models"
    add_add_sub(repository)
    password_hash = generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000")
    daemon = start_daemon(
        repository,
        *explicit_control("add_sub"),
        "--dashboard-password-hash",
        password_hash,
    )
    base = daemon.dashboard_url
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )

    status, document, _ = request(opener, f"{base}/api/v1/models")
    assert (status, document) == (401, {"error": "the dashboard needs a login (POST /login)"})

    status, session, _ = request(opener, f"{base}/api/v1/session")
    assert status == 200 and session["password_set"] and session["control_mode"] == "explicit"
    status, login, _ = request(
        opener, f"{base}/login", {"password": "wrong"}, token=session["csrf_token"]
    )
    assert status == 401
    status, login, _ = request(
        opener, f"{base}/login", {"password": PASSWORD}, token=session["csrf_token"]
    )
    assert (status, login["user"]) == (200, "admin")

    status, overview, headers = request(opener, f"{base}/api/v1/overview")
    assert status == 200
    assert headers["Cache-Control"] == "no-store"
    assert overview["models"] == {"ready": 1, "total": 1}
    assert overview["mqtt"] is None

    status, done, _ = request(
        opener, f"{base}/api/v1/models/add_sub/unload", {}, token=login["csrf_token"]
    )
    assert (status, done) == (200, {"model": "add_sub", "action": "unload", "state": "ok"})
    try:
        urllib.request.urlopen(f"http://{daemon.url}/v2/models/add_sub/ready", timeout=5)
        raise AssertionError("add_sub is still ready after the dashboard unloaded it")
    except urllib.error.HTTPError as error:
        assert error.code in (400, 404, 503)

    status, events, _ = request(opener, f"{base}/api/v1/events")
    assert status == 200
    states = [(e["model"], e["state"]) for e in events["events"] if "model" in e]
    assert ("add_sub", "READY") in states

    key = daemon.log_path.with_suffix(".session.key")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
