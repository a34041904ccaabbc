"""The dashboard inside the real daemon, over HTTP with urllib: its own port
(bound to 0 and logged), a login with a password hash from the settings,
the JSON API, an unload that the v2 API then sees, and the session key kept
with mode 0600."""

from __future__ import annotations

import os
import stat
import urllib.error
import urllib.request

from dashboard.dashboard_client import PASSWORD, PASSWORD_HASH, cookie_opener, json_request

from daemon_process import explicit_control


def test_dashboard_in_the_daemon_logs_in_reads_and_unloads(add_sub_repository, start_daemon):
    daemon = start_daemon(
        add_sub_repository, *explicit_control("add_sub"), "--dashboard-password-hash", PASSWORD_HASH
    )
    base = daemon.dashboard_url
    opener = cookie_opener()

    status, document, _ = json_request(opener, f"{base}/api/v1/models")
    assert (status, document) == (401, {"error": "the dashboard needs a login (POST /login)"})

    status, session, _ = json_request(opener, f"{base}/api/v1/session")
    assert status == 200 and session["password_set"] and session["control_mode"] == "explicit"
    status, login, _ = json_request(
        opener, f"{base}/login", {"password": "wrong"}, token=session["csrf_token"]
    )
    assert status == 401
    status, login, _ = json_request(
        opener, f"{base}/login", {"password": PASSWORD}, token=session["csrf_token"]
    )
    assert (status, login["user"]) == (200, "admin")

    status, overview, headers = json_request(opener, f"{base}/api/v1/overview")
    assert status == 200
    assert headers["Cache-Control"] == "no-store"
    assert overview["models"] == {"ready": 1, "total": 1}
    assert overview["mqtt"] is None

    status, done, _ = json_request(
        opener, f"{base}/api/v1/models/add_sub/unload", {}, token=login["csrf_token"]
    )
    assert (status, done) == (200, {"model": "add_sub", "action": "unload", "state": "ok"})
    try:
        urllib.request.urlopen(f"http://{daemon.url}/v2/models/add_sub/ready", timeout=5)
        raise AssertionError("add_sub is still ready after the dashboard unloaded it")
    except urllib.error.HTTPError as error:
        assert error.code in (400, 404, 503)

    status, events, _ = json_request(opener, f"{base}/api/v1/events")
    assert status == 200
    states = [(e["model"], e["state"]) for e in events["events"] if "model" in e]
    assert ("add_sub", "READY") in states

    key = daemon.log_path.with_suffix(".session.key")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
