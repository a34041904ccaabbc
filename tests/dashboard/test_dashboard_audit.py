"""Who logged in, who was refused and who loaded, unloaded or rolled back
what: one ``key=value`` line each in the journal (edgebox/dashboard/audit.py)."""

from __future__ import annotations

import logging

import pytest
from dashboard_client import PASSWORD, csrf, log_in, post

from model_fixtures import add_add_sub

AUDIT = "edgebox.dashboard.audit"


@pytest.fixture
def audit_lines(caplog):
    caplog.set_level(logging.INFO, logger=AUDIT)

    def lines() -> list[tuple[int, str]]:
        return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == AUDIT]

    return lines


def test_login_logout_and_a_wrong_password_say_who_and_from_where(make_app, audit_lines):
    client = make_app().test_client()
    log_in(client, "wrong")
    log_in(client)
    post(client, "/logout", json={})
    assert audit_lines() == [
        (
            logging.WARNING,
            "Dashboard: login refused user=admin from=127.0.0.1 reason=wrong-password",
        ),
        (logging.INFO, "Dashboard: login ok user=admin from=127.0.0.1"),
        (logging.INFO, "Dashboard: logout user=admin from=127.0.0.1 sessions=all-ended"),
    ]


def test_a_typed_user_name_cannot_break_or_forge_a_line(make_app, audit_lines):
    client = make_app().test_client()
    client.post(
        "/login",
        json={"username": "x reason=ok\nDashboard: login ok user=admin", "password": "nope"},
        headers={"X-CSRF-Token": csrf(client)},
    )
    assert audit_lines() == [
        (
            logging.WARNING,
            'Dashboard: login refused user="x reason=ok\\nDashboard: login ok user=admin" '
            "from=127.0.0.1 reason=wrong-password",
        )
    ]


def test_refusals_past_the_rate_limit_are_logged_once_a_minute_per_address(make_app, audit_lines):
    client = make_app(max_login_attempts_per_minute=1).test_client()
    log_in(client, "wrong")
    for _ in range(3):
        assert log_in(client).status_code == 429
    lines = [text for _, text in audit_lines()]
    assert lines[0].endswith("reason=wrong-password")
    assert len(lines) == 2
    assert lines[1].startswith(
        "Dashboard: login refused user=admin from=127.0.0.1 reason=rate-limit retry_after_s="
    )
    assert lines[1].endswith(" refused_since_last_line=0")


def test_load_and_unload_say_who_and_what_and_whether_it_worked(
    tmp_path, stack, make_app, audit_lines
):
    add_add_sub(tmp_path)
    client = make_app().test_client()
    log_in(client)
    assert post(client, "/api/v1/models/add_sub/load").status_code == 200
    assert post(client, "/api/v1/models/add_sub/unload").status_code == 200
    assert post(client, "/api/v1/models/nothing/load").status_code == 400
    actions = audit_lines()[1:]
    assert actions[:2] == [
        (logging.INFO, "Dashboard: load user=admin from=127.0.0.1 model=add_sub result=ok"),
        (logging.INFO, "Dashboard: unload user=admin from=127.0.0.1 model=add_sub result=ok"),
    ]
    level, text = actions[2]
    assert level == logging.WARNING
    assert text.startswith(
        'Dashboard: load user=admin from=127.0.0.1 model=nothing result=failed error="'
    )


def test_a_login_from_another_address_names_that_address(make_app, audit_lines):
    client = make_app().test_client()
    client.post(
        "/login",
        json={"password": PASSWORD},
        headers={"X-CSRF-Token": csrf(client)},
        environ_base={"REMOTE_ADDR": "10.0.0.3"},
    )
    assert audit_lines() == [(logging.INFO, "Dashboard: login ok user=admin from=10.0.0.3")]
