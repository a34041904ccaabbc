"""What one dashboard app holds besides Flask's own: its parts and settings,
reached from a request through ``state()``."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from edgebox.dashboard.deps import DashboardDeps
from edgebox.dashboard.event_ring import EventRing
from edgebox.dashboard.frame_jpeg import FrameEncoder
from edgebox.dashboard.login_limiter import LoginLimiter
from edgebox.dashboard.sessions import SessionRules
from edgebox.dashboard.settings import DashboardSettings

EXTENSION = "edgebox.dashboard"


@dataclass(frozen=True)
class DashboardState:
    deps: DashboardDeps
    settings: DashboardSettings
    events: EventRing
    """Its thread runs while the server does (``DashboardServer``)."""
    frames: FrameEncoder
    logins: LoginLimiter
    started_at: float
    """Monotonic time the app was made (the daemon's uptime)."""
    sessions: SessionRules
    """Who is logged in; its ``fingerprint`` is None when no password is set."""


def state() -> DashboardState:
    return current_app.extensions[EXTENSION]
