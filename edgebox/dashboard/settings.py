"""The ``dashboard:`` section of the daemon's settings (docs/configuration.md,
docs/dashboard.md).

Parsed by ``edgebox/settings/`` like every section; unlike ``mqtt`` it is on
by default, so the field in ``Settings`` holds ``DashboardSettings()`` rather
than None. ``password_hash`` is a werkzeug hash written by ``edgebox passwd``,
never a password.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

DEFAULT_SESSION_KEY_PATH = Path("/var/lib/edgebox/dashboard/session.key")
MAX_SESSION_LIFETIME_S = 31 * 86400
HASH_METHODS = ("scrypt", "pbkdf2")
"""The werkzeug hash methods ``password_hash`` may use."""


@dataclasses.dataclass(frozen=True)
class DashboardSettings:
    """The web dashboard's port and access rules; the daemon's ``host`` is
    the address it binds."""

    enabled: bool = True
    """Serve the dashboard."""
    port: int = 8080
    """Its own port; 0 picks a free port and logs it."""
    anonymous_read: bool = False
    """Open the pages and the read-only API without a login; actions (load,
    unload, rollback) still need one."""
    password_hash: str = ""
    """The ``admin`` user's password hash, written by ``edgebox passwd``;
    empty: nobody can log in."""
    session_key_path: Path | None = dataclasses.field(
        default=None, metadata={"default_help": str(DEFAULT_SESSION_KEY_PATH)}
    )
    """File holding the key that signs session cookies, made at first start
    (mode 0600); none: ``/var/lib/edgebox/dashboard/session.key``. The
    session epoch that logout renews is kept beside it (``.epoch`` in place
    of its suffix)."""
    session_idle_timeout_s: float = 1800.0
    """A login ends after this many seconds without a request from it (an
    open page polls, so it stays logged in up to ``session_lifetime_s``)."""
    session_lifetime_s: float = 43200.0
    """A login ends this many seconds after it was made, however busy."""
    max_login_attempts_per_minute: int = 5
    """Login attempts accepted from one client address in any 60 s; past it
    the answer is 429."""

    @property
    def resolved_session_key_path(self) -> Path:
        return self.session_key_path or DEFAULT_SESSION_KEY_PATH

    @property
    def resolved_session_epoch_path(self) -> Path:
        return self.resolved_session_key_path.with_suffix(".epoch")

    def problems(self) -> Iterator[tuple[str, str]]:
        """Each ``(field, message)`` wrong with these settings."""
        if not 0 <= self.port <= 65535:
            yield "port", f"expected 0..65535 (0: any free port), got {self.port}"
        if self.password_hash and not looks_like_password_hash(self.password_hash):
            yield (
                "password_hash",
                "expected a hash written by 'edgebox passwd' (scrypt:... or pbkdf2:...), "
                "not a password",
            )
        if not 0 < self.session_lifetime_s <= MAX_SESSION_LIFETIME_S:
            yield (
                "session_lifetime_s",
                f"expected seconds in (0, {MAX_SESSION_LIFETIME_S}] (31 days), "
                f"got {self.session_lifetime_s:g}",
            )
        elif not 0 < self.session_idle_timeout_s <= self.session_lifetime_s:
            yield (
                "session_idle_timeout_s",
                f"expected seconds in (0, session_lifetime_s = {self.session_lifetime_s:g}], "
                f"got {self.session_idle_timeout_s:g}",
            )
        if not 1 <= self.max_login_attempts_per_minute <= 1000:
            yield (
                "max_login_attempts_per_minute",
                f"expected 1..1000, got {self.max_login_attempts_per_minute}",
            )


def looks_like_password_hash(text: str) -> bool:
    """Whether ``text`` has werkzeug's ``method$salt$hash`` shape."""
    parts = text.split("$")
    return len(parts) == 3 and parts[0].split(":")[0] in HASH_METHODS and all(parts)
