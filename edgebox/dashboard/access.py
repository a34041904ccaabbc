"""Who may do what, checked before every request, and the headers on every
answer (docs/dashboard.md, "Security").

- Every POST carries the session's CSRF token (header ``X-CSRF-Token``, or
  field ``csrf_token`` from a plain form): else 403.
- Actions (the API's POSTs) need a logged-in session: else 403.
- Reads (pages, GET API) need one too unless ``anonymous_read``: a page
  redirects to the login, the API answers 401. The Logs page and its API
  always need one: log lines name clients and users.
- The login page, the session endpoint and static files are always open.

Whether a session is logged in is ``SessionRules``' call (sessions.py): the
password it logged in with, the epoch logout renews, its lifetime and idle
timeout. Every request a logged-in session makes counts as activity.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import quote

from flask import Flask, Response, jsonify, redirect, request, session

from edgebox.dashboard.sessions import SessionRules
from edgebox.dashboard.state import state

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
OPEN_ENDPOINTS = ("auth.login_page", "auth.login", "auth.logout", "api.session", "static")
LOGIN_ALWAYS = ("api.logs", "pages.logs")
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; frame-ancestors 'none'"
)


def install_access_rules(app: Flask, sessions: SessionRules, anonymous_read: bool) -> None:
    @app.before_request
    def check_access() -> Response | None:
        if request.method == "POST" and not csrf_token_matches():
            return _refused(403, "missing or wrong CSRF token (header X-CSRF-Token)")
        endpoint = request.endpoint or ""
        if endpoint in OPEN_ENDPOINTS or not endpoint:
            return None
        if sessions.user(session) is not None:
            sessions.touch(session)
            return None
        if request.method == "POST":
            return _refused(403, "this action needs a login: log in as 'admin' first")
        if anonymous_read and endpoint not in LOGIN_ALWAYS:
            return None
        if request.path.startswith("/api/"):
            return _refused(401, "the dashboard needs a login (POST /login)")
        return redirect(f"/login?next={quote(request.full_path.rstrip('?'), safe='/?=&')}")

    @app.after_request
    def security_headers(response: Response) -> Response:
        headers = response.headers
        headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        headers["X-Frame-Options"] = "DENY"
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "no-referrer"
        if not request.path.startswith("/static/"):
            headers["Cache-Control"] = "no-store"
        return response


def password_fingerprint(password_hash: str) -> str:
    return hashlib.sha256(password_hash.encode()).hexdigest()[:16]


def current_user() -> str | None:
    """Who this request's session is logged in as: ``admin`` or None."""
    return state().sessions.user(session)


def csrf_token() -> str:
    """The session's token, made on first use."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def renew_session(sessions: SessionRules, login: bool) -> str:
    """A fresh session (at login and logout): nothing carried over, a new
    token; a login of ``admin`` when ``login``. Returns the token."""
    session.clear()
    if login:
        sessions.begin(session)
    return csrf_token()


def csrf_token_matches() -> bool:
    expected = session.get("csrf")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.mimetype in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        sent = request.form.get(CSRF_FIELD)
    return bool(expected) and bool(sent) and hmac.compare_digest(str(sent), str(expected))


def _refused(status: int, message: str) -> Response:
    response = jsonify(error=message)
    response.status_code = status
    return response
