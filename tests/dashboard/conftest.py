"""An in-process dashboard over the in-process stack (explicit mode), with a
small web root of its own so these tests do not depend on web/'s pages;
driven by Flask's test client."""

from __future__ import annotations

import time

import pytest
from dashboard_client import PASSWORD_HASH, dashboard_deps
from rollout_setup import start_shadow_rollout

from edgebox.dashboard.app import create_app
from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.settings import DashboardSettings

PAGE = '<meta name="csrf-token" content="{{ csrf_token }}">page={{ page }} user={{ user }}\n'


@pytest.fixture
def web_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("web")  # not in tmp_path: that is the model repository
    (root / "templates").mkdir(parents=True)
    (root / "static").mkdir()
    for page in ("overview", "models", "streams", "events", "logs"):
        (root / "templates" / f"{page}.html").write_text(PAGE)
    (root / "templates" / "login.html").write_text(PAGE + "error={{ error }} next={{ next }}\n")
    (root / "static" / "app.js").write_text("// the page's script\n")
    return root


@pytest.fixture
def make_app(stack, web_root, tmp_path_factory):
    """``make_app(**settings, deps=..., clock=...)``: an app over ``stack``;
    the apps of one test share a session key and epoch (as restarts of one
    daemon do); every event ring started is stopped at teardown."""
    apps = []
    state = tmp_path_factory.mktemp("state")

    def make(deps: DashboardDeps | None = None, clock=time.time, **fields):
        fields.setdefault("password_hash", PASSWORD_HASH)
        fields.setdefault("session_key_path", state / "session.key")
        settings = DashboardSettings(**fields)
        deps = deps or dashboard_deps(stack)
        app = create_app(deps, settings, web_root=web_root, session_key=b"k" * 32, clock=clock)
        app.testing = True
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["edgebox.dashboard"].events.stop(5)


@pytest.fixture
def model_in_rollout(tmp_path, stack) -> str:
    """The name of a model in ``stack`` whose version 2 is in a shadow
    rollout against version 1 (rollout_setup.py)."""
    return start_shadow_rollout(tmp_path, stack)
