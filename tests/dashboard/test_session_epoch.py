"""The session epoch: made once beside the session key (mode 0600), renewed
by logout and kept, so a restart keeps logouts; held in memory when it
cannot be kept (edgebox/dashboard/sessions.py)."""

from __future__ import annotations

import logging
import os
import stat

from edgebox.dashboard.sessions import SessionEpoch


def test_made_at_first_start_private_and_kept(tmp_path):
    path = tmp_path / "dashboard" / "session.epoch"
    epoch = SessionEpoch(path).current
    assert path.read_text() == epoch + "\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert SessionEpoch(path).current == epoch


def test_renewed_epoch_is_what_the_next_start_reads(tmp_path):
    path = tmp_path / "session.epoch"
    first = SessionEpoch(path)
    before = first.current
    first.renew()
    assert first.current != before
    assert SessionEpoch(path).current == first.current


def test_a_malformed_epoch_is_replaced(tmp_path, caplog):
    path = tmp_path / "session.epoch"
    path.write_text("not an epoch\n")
    with caplog.at_level(logging.WARNING):
        epoch = SessionEpoch(path).current
    assert path.read_text() == epoch + "\n"
    assert f"session epoch '{path}' is malformed" in caplog.text


def test_an_unwritable_place_gives_an_epoch_in_memory_with_a_warning(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        first = SessionEpoch(blocked / "session.epoch")
        second = SessionEpoch(blocked / "session.epoch")
    assert first.current != second.current  # a restart ends every login
    assert f"cannot keep the session epoch in '{blocked / 'session.epoch'}'" in caplog.text
    assert "logins end when edgebox stops" in caplog.text
    before = first.current
    first.renew()
    assert first.current != before
