"""The session key: made once with mode 0600 in a 0700 folder, then reused;
held in memory when it cannot be kept."""

from __future__ import annotations

import logging
import os
import stat

from edgebox.dashboard.session_key import KEY_BYTES, load_or_create_session_key


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_made_at_first_start_private_and_kept(tmp_path):
    path = tmp_path / "state" / "dashboard" / "session.key"
    key = load_or_create_session_key(path)
    assert len(key) == KEY_BYTES
    assert path.read_bytes() == key
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert load_or_create_session_key(path) == key


def test_a_short_key_is_replaced(tmp_path):
    path = tmp_path / "session.key"
    path.write_bytes(b"short")
    key = load_or_create_session_key(path)
    assert len(key) == KEY_BYTES and path.read_bytes() == key


def test_an_unwritable_place_gives_a_key_in_memory_with_a_warning(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        key = load_or_create_session_key(blocked / "session.key")
    assert len(key) == KEY_BYTES
    assert f"cannot keep the session key in '{blocked / 'session.key'}'" in caplog.text
    assert "logins end when edgebox stops" in caplog.text
