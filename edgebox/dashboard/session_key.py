"""The key that signs the dashboard's session cookies: made at first start and
kept, so logins survive a restart."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)

KEY_BYTES = 32


def load_or_create_session_key(path: Path) -> bytes:
    """The key in ``path``, made there first (mode 0600, missing folders 0700)
    when absent or too short. When the file can be neither read nor written
    (no state directory on a development machine), a key held in memory is
    returned with a warning: the dashboard works and logins end with the
    daemon."""
    try:
        key = path.read_bytes()
        if len(key) >= KEY_BYTES:
            return key
        log.warning("Dashboard: session key '%s' is too short; making a new one", path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return _in_memory(path, exc)
    key = secrets.token_bytes(KEY_BYTES)
    try:
        write_private_file(path, key)
    except OSError as exc:
        return _in_memory(path, exc)
    log.info("Dashboard: made a new session key in '%s'", path)
    return key


def write_private_file(path: Path, data: bytes) -> None:
    """Replaces ``path`` atomically with ``data``, mode 0600 (missing folders
    0700), so a reader never sees half a file; raises OSError."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    os.replace(temporary, path)


def _in_memory(path: Path, exc: OSError) -> bytes:
    log.warning(
        "Dashboard: cannot keep the session key in '%s' (%s); using one held in memory, "
        "so logins end when edgebox stops",
        path,
        exc.strerror or exc,
    )
    return secrets.token_bytes(KEY_BYTES)
