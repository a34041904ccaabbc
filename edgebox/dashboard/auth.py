"""Blueprint ``auth``: login and logout of the one user, ``admin``, against
the hash ``edgebox passwd`` wrote; attempts rate-limited per client address."""

from __future__ import annotations

import logging
import math

from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    session,
)
from werkzeug.security import check_password_hash

from edgebox.dashboard.access import renew_session
from edgebox.dashboard.audit import audit
from edgebox.dashboard.next_page import same_site_path
from edgebox.dashboard.sessions import USER
from edgebox.dashboard.state import state

auth = Blueprint("auth", __name__)

NO_PASSWORD = "no password is set: run 'sudo edgebox passwd' on the device, then restart edgebox"
WRONG = "wrong user name or password"


@auth.get("/login")
def login_page() -> str:
    return render_template("login.html", error=None, next=_next_page())


@auth.post("/login")
def login() -> Response | tuple:
    settings = state().settings
    form = (request.get_json(silent=True) or {}) if request.is_json else request.form
    user = str(form.get("username") or USER)
    refused = state().logins.attempt(request.remote_addr or "")
    if refused is not None:
        wait_s = math.ceil(refused.wait_s)
        if refused.report:
            audit(
                "login refused",
                user,
                logging.WARNING,
                reason="rate-limit",
                retry_after_s=wait_s,
                refused_since_last_line=refused.held,
            )
        response = _answer(
            429, f"too many login attempts from this address; try again in {wait_s} s"
        )
        response.headers["Retry-After"] = str(wait_s)
        return response
    password = str(form.get("password") or "")
    if not settings.password_hash:
        audit("login refused", user, logging.WARNING, reason="no-password-set")
        return _answer(401, NO_PASSWORD)
    if user != USER or not check_password_hash(settings.password_hash, password):
        audit("login refused", user, logging.WARNING, reason="wrong-password")
        return _answer(401, WRONG)
    token = renew_session(state().sessions, login=True)
    audit("login ok", USER)
    if request.is_json:
        return jsonify(user=USER, csrf_token=token)
    return redirect(_next_page(), code=303)


@auth.post("/logout")
def logout() -> Response:
    """Ends every session when this one is logged in (one user: logging out
    in one browser logs out all); anyone else only gets a fresh session, so
    a stranger cannot log the admin out."""
    sessions = state().sessions
    if sessions.user(session) is not None:
        sessions.end_all()
        audit("logout", USER, sessions="all-ended")
    token = renew_session(sessions, login=False)
    if request.is_json:
        return jsonify(user=None, csrf_token=token)
    return redirect("/", code=303)


def _answer(status: int, message: str) -> Response:
    if request.is_json:
        response = jsonify(error=message)
    else:
        response = current_app.make_response(
            render_template("login.html", error=message, next=_next_page())
        )
    response.status_code = status
    return response


def _next_page() -> str:
    """Where to go after the login: a path on this site, never elsewhere."""
    return same_site_path(request.values.get("next", "/"))
