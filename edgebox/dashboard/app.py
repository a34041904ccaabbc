"""``create_app``: the dashboard's Flask app, built from the parts passed in
(Flask's app-factory pattern), with blueprints ``api``, ``pages`` and
``auth``. Templates and static files come from ``web/`` (``find_web_root``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from edgebox import __version__
from edgebox.dashboard.access import (
    csrf_token,
    current_user,
    install_access_rules,
    password_fingerprint,
)
from edgebox.dashboard.alerts_api import alerts_api
from edgebox.dashboard.api import api
from edgebox.dashboard.auth import auth
from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.event_ring import EventRing
from edgebox.dashboard.frame_jpeg import FrameEncoder
from edgebox.dashboard.history_api import history_api
from edgebox.dashboard.login_limiter import LoginLimiter
from edgebox.dashboard.pages import pages
from edgebox.dashboard.session_key import load_or_create_session_key
from edgebox.dashboard.sessions import SessionEpoch, SessionRules
from edgebox.dashboard.settings import DashboardSettings
from edgebox.dashboard.state import EXTENSION, DashboardState
from edgebox.dashboard.vendor_check import warn_if_vendor_missing

INSTALLED_WEB_ROOT = Path("/usr/share/edgebox/web")
"""Where the .deb puts ``web/`` (debian/rules)."""
SOURCE_WEB_ROOT = Path(__file__).resolve().parents[2] / "web"
"""``web/`` beside the package in a source tree (``make run``, the tests)."""
WHEEL_WEB_ROOT = Path(sys.prefix) / "share" / "edgebox" / "web"
"""Where a wheel's ``data_files`` put ``web/`` (setup.cfg)."""
MAX_BODY_BYTES = 64 * 1024


def find_web_root(
    candidates: tuple[Path, ...] = (SOURCE_WEB_ROOT, WHEEL_WEB_ROOT, INSTALLED_WEB_ROOT),
) -> Path:
    """The first candidate holding ``templates/``; the source tree's when none
    does (pages then answer 500 naming the missing template)."""
    for candidate in candidates:
        if (candidate / "templates").is_dir():
            return candidate
    return candidates[0]


def create_app(
    deps: DashboardDeps,
    settings: DashboardSettings,
    *,
    web_root: Path | None = None,
    session_key: bytes | None = None,
    clock: Callable[[], float] = time.time,
) -> Flask:
    """The app; starts no thread (``DashboardServer`` starts the event ring's
    and serves it). ``session_key`` None: read from (or made in)
    ``settings.resolved_session_key_path``; the session epoch is kept beside
    it either way. ``clock``: the wall clock sessions are timed by."""
    root = web_root or find_web_root()
    warn_if_vendor_missing(root)
    app = Flask(
        "edgebox.dashboard",
        template_folder=str(root / "templates"),
        static_folder=str(root / "static"),
        static_url_path="/static",
    )
    app.config.update(
        SECRET_KEY=session_key or load_or_create_session_key(settings.resolved_session_key_path),
        SESSION_COOKIE_NAME="edgebox_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_lifetime_s),
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    fingerprint = password_fingerprint(settings.password_hash) if settings.password_hash else None
    sessions = SessionRules(
        fingerprint,
        SessionEpoch(settings.resolved_session_epoch_path),
        settings.session_idle_timeout_s,
        settings.session_lifetime_s,
        clock,
    )
    app.extensions[EXTENSION] = DashboardState(
        deps=deps,
        settings=settings,
        events=EventRing(deps.bus),
        frames=FrameEncoder(deps.frames),
        logins=LoginLimiter(settings.max_login_attempts_per_minute),
        started_at=time.monotonic(),
        sessions=sessions,
    )
    install_access_rules(app, sessions, settings.anonymous_read)
    app.register_blueprint(api)
    app.register_blueprint(pages)
    app.register_blueprint(auth)
    app.register_blueprint(history_api)
    app.register_blueprint(alerts_api)

    @app.context_processor
    def page_context() -> dict[str, Any]:
        endpoint = request.endpoint or ""
        return {
            "page": "login" if endpoint.startswith("auth.") else endpoint.removeprefix("pages."),
            "user": current_user(),
            "anonymous_read": settings.anonymous_read,
            "control_mode": deps.control_mode,
            "edgebox_version": __version__,
            "password_set": fingerprint is not None,
            "csrf_token": csrf_token(),
        }

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response | HTTPException:
        """JSON under /api/, Flask's page elsewhere."""
        if not request.path.startswith("/api/"):
            return error
        response = jsonify(error=error.description or error.name)
        response.status_code = error.code or 500
        return response

    return app


def state_of(app: Flask) -> DashboardState:
    return app.extensions[EXTENSION]
