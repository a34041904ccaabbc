"""A login ends at logout in every browser, survives no password change,
and lapses after its idle timeout or its lifetime (edgebox/dashboard/
sessions.py), whatever cookie a browser kept."""

from __future__ import annotations

import pytest
from dashboard_client import csrf, log_in, post

from model_fixtures import add_add_sub

COOKIE = "edgebox_session"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def saved_cookie(client) -> str:
    return client.get_cookie(COOKIE).value


def browser_with(app, cookie: str):
    client = app.test_client()
    client.set_cookie(COOKIE, cookie)
    return client


def test_a_cookie_saved_before_logout_reaches_no_action_after_it(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    stack.manager.load_model("add_sub")
    app = make_app()
    client = app.test_client()
    log_in(client)
    token = csrf(client)
    cookie = saved_cookie(client)
    assert post(client, "/logout", json={}).status_code == 200

    replayed = browser_with(app, cookie)
    reply = replayed.post("/api/v1/models/add_sub/unload", json={}, headers={"X-CSRF-Token": token})
    assert reply.status_code == 403
    assert stack.registry.is_ready("add_sub")
    assert replayed.get("/api/v1/models").status_code == 401
    assert replayed.get("/api/v1/session").get_json()["user"] is None


def test_logout_in_one_browser_ends_the_login_in_every_other(make_app):
    app = make_app()
    first, second = app.test_client(), app.test_client()
    log_in(first)
    log_in(second)
    post(first, "/logout", json={})
    assert second.get("/api/v1/models").status_code == 401


def test_a_login_after_logout_works(make_app):
    client = make_app().test_client()
    log_in(client)
    post(client, "/logout", json={})
    assert log_in(client).status_code == 200
    assert client.get("/api/v1/models").status_code == 200


def test_a_logout_is_not_undone_by_a_restart(make_app):
    before = make_app()
    client = before.test_client()
    log_in(client)
    cookie = saved_cookie(client)
    post(client, "/logout", json={})
    after_restart = make_app()
    assert browser_with(after_restart, cookie).get("/api/v1/models").status_code == 401


def test_a_login_survives_a_restart_without_logout(make_app):
    client = make_app().test_client()
    log_in(client)
    cookie = saved_cookie(client)
    assert browser_with(make_app(), cookie).get("/api/v1/models").status_code == 200


def test_a_logout_by_someone_not_logged_in_ends_no_login(make_app):
    app = make_app()
    admin, stranger = app.test_client(), app.test_client()
    log_in(admin)
    assert post(stranger, "/logout", json={}).status_code == 200
    assert admin.get("/api/v1/models").status_code == 200


def test_a_login_lapses_after_the_idle_timeout(make_app):
    clock = Clock()
    client = make_app(clock=clock, session_idle_timeout_s=600).test_client()
    log_in(client)
    for _ in range(5):  # each request restarts the idle timeout
        clock.now += 599
        assert client.get("/api/v1/models").status_code == 200
    clock.now += 601
    assert client.get("/api/v1/models").status_code == 401
    assert client.get("/api/v1/session").get_json()["user"] is None


def test_a_login_lapses_after_its_lifetime_however_busy(make_app):
    clock = Clock()
    client = make_app(
        clock=clock, session_idle_timeout_s=600, session_lifetime_s=3600
    ).test_client()
    log_in(client)
    for _ in range(5):
        clock.now += 590
        assert client.get("/api/v1/models").status_code == 200
    clock.now += 590  # 3,540 s after the login
    assert client.get("/api/v1/models").status_code == 200
    clock.now += 61
    assert client.get("/api/v1/models").status_code == 401


def test_defaults_end_an_idle_login_after_30_minutes_and_any_after_12_hours(make_app):
    clock = Clock()
    app = make_app(clock=clock)
    idle, busy = app.test_client(), app.test_client()
    log_in(idle)
    log_in(busy)
    clock.now += 1801
    assert idle.get("/api/v1/models").status_code == 401
    for _ in range(24):
        clock.now += 1790
        busy.get("/api/v1/overview")
    assert busy.get("/api/v1/models").status_code == 401  # 12 h 1 min after the login


@pytest.mark.parametrize("step_s", [-3600.0, 86400.0 * 40])
def test_a_clock_step_far_from_the_login_ends_it(make_app, step_s):
    clock = Clock()
    client = make_app(clock=clock).test_client()
    log_in(client)
    clock.now += step_s
    assert client.get("/api/v1/models").status_code == 401
