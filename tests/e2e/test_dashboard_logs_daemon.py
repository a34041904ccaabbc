"""The Logs page's API inside the real daemon: its own start-up lines, a
failed and a good login as the audit logs them, no password among them, and
the warning a settings file readable by every user earns at start."""

from __future__ import annotations

import os

from dashboard.dashboard_client import PASSWORD, PASSWORD_HASH, cookie_opener, json_request

from daemon_process import explicit_control, wait_for


def test_the_daemons_logs_through_its_dashboard(add_sub_repository, start_daemon, tmp_path):
    config = tmp_path / "edgebox.yaml"
    config.write_text(f'dashboard:\n  password_hash: "{PASSWORD_HASH}"\n')
    os.chmod(config, 0o644)
    daemon = start_daemon(add_sub_repository, *explicit_control("add_sub"), "--config", str(config))
    base = daemon.dashboard_url
    opener = cookie_opener()

    status, answer, _ = json_request(opener, f"{base}/api/v1/logs")
    assert (status, answer) == (401, {"error": "the dashboard needs a login (POST /login)"})
    _, session, _ = json_request(opener, f"{base}/api/v1/session")
    wrong = "wrong-hunter2-guess"
    status, _, _ = json_request(
        opener, f"{base}/login", {"password": wrong}, token=session["csrf_token"]
    )
    assert status == 401
    status, _, _ = json_request(
        opener, f"{base}/login", {"password": PASSWORD}, token=session["csrf_token"]
    )
    assert status == 200

    def dashboard_lines() -> list[dict]:
        _, answer, _ = json_request(opener, f"{base}/api/v1/logs?q=dashboard:&level=INFO")
        return answer["lines"]

    lines = wait_for(
        lambda: (found := dashboard_lines()) and "login ok" in found[-1]["message"] and found,
        what="the login's audit line in /api/v1/logs",
    )
    messages = [line["message"] for line in lines]
    assert any(
        f"{config} holds the password hash but every local user may read it" in message
        for message in messages
    )
    assert any("login refused" in m and "reason=wrong-password" in m for m in messages)
    assert [line["level"] for line in lines if "login refused" in line["message"]] == ["WARNING"]

    status, answer, _ = json_request(opener, f"{base}/api/v1/logs?limit=2000")
    assert status == 200
    everything = [line["message"] for line in answer["lines"]]
    assert any("Dashboard listening on 127.0.0.1" in message for message in everything)
    assert not any(PASSWORD in message or wrong in message for message in everything)
