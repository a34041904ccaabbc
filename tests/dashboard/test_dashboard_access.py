"""Who may read and act, CSRF, the login and its rate limit, and the headers
on every answer (edgebox/dashboard/access.py and auth.py)."""

from __future__ import annotations

from dashboard_client import PASSWORD, csrf, dashboard_deps, log_in, post
from werkzeug.security import generate_password_hash

from edgebox.dashboard.access import CONTENT_SECURITY_POLICY
from edgebox.lifecycle.states import ModelState
from model_fixtures import add_add_sub

NEEDS_LOGIN = {"error": "the dashboard needs a login (POST /login)"}
NO_CSRF = {"error": "missing or wrong CSRF token (header X-CSRF-Token)"}
ACTION_NEEDS_LOGIN = {"error": "this action needs a login: log in as 'admin' first"}


def test_without_anonymous_read_pages_redirect_to_the_login(make_app):
    client = make_app().test_client()
    reply = client.get("/models")
    assert reply.status_code == 302
    assert reply.headers["Location"] == "/login?next=/models"


def test_without_anonymous_read_the_api_answers_401(make_app):
    client = make_app().test_client()
    for path in ("/api/v1/overview", "/api/v1/models", "/api/v1/events", "/api/v1/streams"):
        reply = client.get(path)
        assert (reply.status_code, reply.get_json()) == (401, NEEDS_LOGIN), path


def test_login_page_session_and_static_files_are_always_open(make_app):
    client = make_app().test_client()
    assert client.get("/login").status_code == 200
    assert client.get("/api/v1/session").status_code == 200
    assert client.get("/static/app.js").status_code == 200


def test_anonymous_read_opens_pages_and_the_read_api(make_app):
    client = make_app(anonymous_read=True).test_client()
    page = client.get("/")
    assert page.status_code == 200
    assert b"page=overview user=None" in page.data
    assert client.get("/api/v1/models").status_code == 200


def test_wrong_password_is_refused(make_app):
    client = make_app().test_client()
    reply = log_in(client, "not the password")
    assert (reply.status_code, reply.get_json()) == (401, {"error": "wrong user name or password"})
    assert client.get("/api/v1/models").status_code == 401


def test_wrong_password_from_the_form_shows_the_login_page_again(make_app):
    client = make_app().test_client()
    token = csrf(client)
    reply = client.post(
        "/login", data={"password": "nope", "csrf_token": token, "next": "/streams"}
    )
    assert reply.status_code == 401
    assert b"error=wrong user name or password next=/streams" in reply.data


def test_right_password_logs_in_and_opens_the_api(make_app):
    client = make_app().test_client()
    reply = log_in(client)
    assert reply.status_code == 200
    assert reply.get_json()["user"] == "admin"
    assert client.get("/api/v1/models").status_code == 200
    assert client.get("/api/v1/session").get_json()["user"] == "admin"
    assert b"user=admin" in client.get("/").data


def test_form_login_returns_to_the_page_asked_for_on_this_site_only(make_app):
    client = make_app(max_login_attempts_per_minute=100).test_client()
    for asked, landed in (
        ("/streams", "/streams"),
        ("//evil.example/", "/"),
        ("http://x/", "/"),
        ("/\t/evil.example", "/"),  # next=/%09/evil.example in the form body
        ("/\\evil.example", "/"),
        ("/..//evil.example", "/"),
        ("/streams\r\nSet-Cookie: a=b", "/streamsSet-Cookie:%20a=b"),
    ):
        reply = client.post(
            "/login", data={"password": PASSWORD, "csrf_token": csrf(client), "next": asked}
        )
        assert (reply.status_code, reply.headers["Location"]) == (303, landed), asked


def test_login_page_offers_only_a_path_on_this_site_as_next(make_app):
    client = make_app().test_client()
    assert client.get("/login?next=/%09/evil.example").data.endswith(b" next=/")
    assert client.get("/login?next=/streams").data.endswith(b" next=/streams")


def test_login_with_no_password_set_says_how_to_set_one(make_app):
    client = make_app(password_hash="").test_client()
    reply = log_in(client, "")
    assert reply.status_code == 401
    assert reply.get_json() == {
        "error": "no password is set: run 'sudo edgebox passwd' on the device, then restart edgebox"
    }


def test_logout_ends_the_session(make_app):
    client = make_app().test_client()
    log_in(client)
    reply = post(client, "/logout", json={})
    assert reply.get_json()["user"] is None
    assert client.get("/api/v1/models").status_code == 401


def test_a_new_password_ends_sessions_made_with_the_old_one(make_app):
    first = make_app()
    client = first.test_client()
    log_in(client)
    assert client.get("/api/v1/models").status_code == 200
    cookie = client.get_cookie("edgebox_session").value
    after_passwd = make_app(password_hash=generate_password_hash("another one", "pbkdf2:sha256:1"))
    other = after_passwd.test_client()
    other.set_cookie("edgebox_session", cookie)
    assert other.get("/api/v1/models").status_code == 401


def test_post_without_the_csrf_token_is_refused(make_app):
    client = make_app().test_client()
    log_in(client)
    for path in ("/api/v1/models/add_sub/unload", "/logout", "/login"):
        reply = client.post(path, json={})
        assert (reply.status_code, reply.get_json()) == (403, NO_CSRF), path
    wrong = client.post(
        "/api/v1/models/add_sub/unload", headers={"X-CSRF-Token": "guessed"}, json={}
    )
    assert (wrong.status_code, wrong.get_json()) == (403, NO_CSRF)


def test_unload_without_login_is_refused_and_with_login_unloads(tmp_path, stack, make_app):
    add_add_sub(tmp_path)
    stack.manager.load_model("add_sub")
    client = make_app(anonymous_read=True).test_client()

    refused = post(client, "/api/v1/models/add_sub/unload")
    assert (refused.status_code, refused.get_json()) == (403, ACTION_NEEDS_LOGIN)
    assert stack.registry.is_ready("add_sub")

    log_in(client)
    done = post(client, "/api/v1/models/add_sub/unload")
    assert (done.status_code, done.get_json()) == (
        200,
        {"model": "add_sub", "action": "unload", "state": "ok"},
    )
    assert not stack.registry.is_ready("add_sub")
    states = client.get("/api/v1/models").get_json()["models"][0]["versions"]
    assert [v["state"] for v in states] == [ModelState.UNAVAILABLE.value]

    assert post(client, "/api/v1/models/add_sub/load").status_code == 200
    assert stack.registry.is_ready("add_sub")


def test_load_and_unload_outside_explicit_mode_answer_503_with_the_daemons_message(stack, make_app):
    from edgebox.repository_control import RepositoryControl

    poll = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, "poll")
    deps = dashboard_deps(stack, control_mode="poll")
    deps = type(deps)(**{**deps.__dict__, "repository_control": poll})
    client = make_app(deps=deps).test_client()
    log_in(client)
    reply = post(client, "/api/v1/models/add_sub/unload")
    assert reply.status_code == 503
    assert reply.get_json() == {
        "error": "explicit model load / unload is not allowed in model control mode 'poll'; "
        "start the server with --model-control-mode explicit"
    }


def test_login_attempts_past_the_limit_answer_429(make_app):
    client = make_app(max_login_attempts_per_minute=3).test_client()
    for _ in range(3):
        assert log_in(client, "wrong").status_code == 401
    limited = log_in(client)  # even the right password
    assert limited.status_code == 429
    assert limited.get_json()["error"].startswith(
        "too many login attempts from this address; try again in "
    )
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    other = make_app(max_login_attempts_per_minute=3).test_client()
    assert log_in(other).status_code == 200  # its own limiter: a new app, a new minute


def test_limit_is_per_client_address(make_app):
    app = make_app(max_login_attempts_per_minute=1)
    client = app.test_client()
    assert log_in(client, "wrong").status_code == 401
    assert log_in(client).status_code == 429
    elsewhere = app.test_client()
    token = csrf(elsewhere)
    reply = elsewhere.post(
        "/login",
        json={"password": PASSWORD},
        headers={"X-CSRF-Token": token},
        environ_base={"REMOTE_ADDR": "10.0.0.9"},
    )
    assert reply.status_code == 200


def test_security_headers_on_pages_api_and_static_files(make_app):
    client = make_app(anonymous_read=True).test_client()
    for path in ("/", "/login", "/api/v1/overview", "/static/app.js", "/api/v1/nothing"):
        headers = client.get(path).headers
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
        assert headers["X-Frame-Options"] == "DENY", path
        assert headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["Referrer-Policy"] == "no-referrer", path
    assert client.get("/api/v1/overview").headers["Cache-Control"] == "no-store"
    assert client.get("/").headers["Cache-Control"] == "no-store"
    assert CONTENT_SECURITY_POLICY == (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; frame-ancestors 'none'"
    )


def test_unknown_api_path_is_a_json_404(make_app):
    reply = make_app(anonymous_read=True).test_client().get("/api/v1/nothing")
    assert reply.status_code == 404
    assert "error" in reply.get_json()


def test_session_cookie_is_http_only_and_same_site_strict(make_app):
    client = make_app().test_client()
    reply = client.get("/api/v1/session")
    cookie = reply.headers["Set-Cookie"]
    assert cookie.startswith("edgebox_session=")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie


def test_pages_carry_the_sessions_csrf_token(make_app):
    client = make_app(anonymous_read=True).test_client()
    token = csrf(client)
    assert f'<meta name="csrf-token" content="{token}">'.encode() in client.get("/models").data
