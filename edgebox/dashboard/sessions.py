"""Which session cookie still names a logged-in ``admin``.

Flask's session lives in the cookie itself (signed, not stored), so clearing
it at logout only changes the browser that logged out: a copy saved before
still carries a valid signature. What the daemon keeps instead is an epoch,
a random token every login copies into its session: logout draws a new one,
and every session issued before it stops matching at once, in every
browser (there is one user, so logout means all of them). The epoch is kept
beside the session key, so a restart does not bring logged-out cookies back.

Each session also carries when it was issued and when it was last used,
checked against an absolute lifetime and an idle timeout on the daemon's
wall clock (a cookie outlives a restart, a monotonic clock does not).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from edgebox.dashboard.session_key import write_private_file

log = logging.getLogger(__name__)

USER = "admin"
EPOCH_BYTES = 16
CLOCK_SLACK_S = 60.0
"""How far in the future a session's times may lie (the clock stepped back
a little, e.g. by NTP) before the session counts as forged or stale."""


class SessionEpoch:
    """The current epoch, read from (or made in) ``path``; renewed by logout
    from any request thread (one lock). When the file can be neither read
    nor written, an epoch held in memory is used, with a warning: a restart
    then ends every login, as the in-memory session key does."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._kept = True
        self._current = self._load()

    @property
    def current(self) -> str:
        return self._current

    def renew(self) -> None:
        """A new epoch, so every session issued so far is over."""
        epoch = secrets.token_hex(EPOCH_BYTES)
        with self._lock:
            self._current = epoch
            if self._kept:
                try:
                    write_private_file(self._path, epoch.encode() + b"\n")
                except OSError as exc:
                    log.warning(
                        "Dashboard: cannot write the session epoch '%s' (%s); sessions ended "
                        "now may be valid again after a restart",
                        self._path,
                        exc.strerror or exc,
                    )

    def _load(self) -> str:
        try:
            epoch = self._path.read_text(encoding="ascii").strip()
            if len(epoch) == 2 * EPOCH_BYTES and all(c in "0123456789abcdef" for c in epoch):
                return epoch
            log.warning("Dashboard: session epoch '%s' is malformed; making a new one", self._path)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError) as exc:
            return self._in_memory(exc)
        epoch = secrets.token_hex(EPOCH_BYTES)
        try:
            write_private_file(self._path, epoch.encode() + b"\n")
        except OSError as exc:
            return self._in_memory(exc)
        return epoch

    def _in_memory(self, exc: Exception) -> str:
        self._kept = False
        log.warning(
            "Dashboard: cannot keep the session epoch in '%s' (%s); using one held in memory, "
            "so logins end when edgebox stops",
            self._path,
            getattr(exc, "strerror", None) or exc,
        )
        return secrets.token_hex(EPOCH_BYTES)


class SessionRules:
    """Reads and writes the login fields of a Flask session; shared by the
    request threads, holds nothing per session."""

    def __init__(
        self,
        fingerprint: str | None,
        epoch: SessionEpoch,
        idle_timeout_s: float,
        lifetime_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fingerprint = fingerprint
        """Of the password hash (``password_fingerprint``); None when no
        password is set, and then nobody is ever logged in."""
        self._epoch = epoch
        self._idle_timeout_s = idle_timeout_s
        self._lifetime_s = lifetime_s
        self._clock = clock

    def user(self, session: MutableMapping[str, Any]) -> str | None:
        """``admin`` while ``session`` was issued with the current password
        and epoch, within its lifetime and idle timeout; else None."""
        if self.fingerprint is None or session.get("user") != USER:
            return None
        if not hmac.compare_digest(str(session.get("pw", "")), self.fingerprint):
            return None
        if not hmac.compare_digest(str(session.get("epoch", "")), self._epoch.current):
            return None
        now = self._clock()
        issued, seen = session.get("issued"), session.get("seen")
        if not _within(now, issued, self._lifetime_s) or not _within(
            now, seen, self._idle_timeout_s
        ):
            return None
        return USER

    def begin(self, session: MutableMapping[str, Any]) -> None:
        """Makes ``session`` (already cleared) a login of ``admin``."""
        now = int(self._clock())
        session.update(user=USER, pw=self.fingerprint, epoch=self._epoch.current)
        session.update(issued=now, seen=now)

    def touch(self, session: MutableMapping[str, Any]) -> None:
        """Marks ``session`` used now, restarting its idle timeout."""
        now = int(self._clock())
        if session.get("seen") != now:
            session["seen"] = now

    def end_all(self) -> None:
        """Logout: every session issued so far is over, this one included."""
        self._epoch.renew()


def _within(now: float, since: Any, limit_s: float) -> bool:
    if isinstance(since, bool) or not isinstance(since, (int, float)):
        return False
    return -CLOCK_SLACK_S <= now - since <= limit_s
