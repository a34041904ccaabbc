"""``edgebox passwd``: the hash goes into the config file's dashboard section,
every other line of the file stays as it was."""

from __future__ import annotations

import io
import os
import stat

import pytest
import yaml
from werkzeug.security import check_password_hash

from edgebox.cli import main
from edgebox.dashboard.password_file import exposure, set_password_hash
from edgebox.settings import load_settings

HASH = "scrypt:32768:8:1$salt$" + "ab" * 32


def written(path):
    return yaml.safe_load(path.read_text())


def test_appends_a_dashboard_section_when_there_is_none(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text("# my settings\nhttp_port: 9000  # kept\n")
    set_password_hash(path, HASH)
    assert path.read_text() == (
        f'# my settings\nhttp_port: 9000  # kept\n\ndashboard:\n  password_hash: "{HASH}"\n'
    )


def test_replaces_the_hash_in_a_block_section_and_keeps_the_rest(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text(
        "dashboard:\n"
        "    # who may read\n"
        "    anonymous_read: true\n"
        '    password_hash: "pbkdf2:old$x$y"\n'
        "    port: 8081\n"
        "log_verbose: 1\n"
    )
    set_password_hash(path, HASH)
    assert path.read_text() == (
        "dashboard:\n"
        "    # who may read\n"
        "    anonymous_read: true\n"
        f'    password_hash: "{HASH}"\n'
        "    port: 8081\n"
        "log_verbose: 1\n"
    )


def test_adds_the_hash_to_a_block_section_without_one(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text("dashboard:\n  port: 8081\nlog_verbose: 1\n")
    set_password_hash(path, HASH)
    assert written(path) == {"dashboard": {"port": 8081, "password_hash": HASH}, "log_verbose": 1}
    assert path.read_text().startswith(f'dashboard:\n  password_hash: "{HASH}"\n  port: 8081\n')


@pytest.mark.parametrize(
    "section", ["dashboard: {anonymous_read: true}", "dashboard:", "dashboard: {}"]
)
def test_flow_and_empty_sections_become_blocks(tmp_path, section):
    path = tmp_path / "edgebox.yaml"
    path.write_text(f"log_verbose: 1\n{section}\nhttp_port: 9000\n")
    set_password_hash(path, HASH)
    document = written(path)
    assert document["dashboard"]["password_hash"] == HASH
    assert document["log_verbose"] == 1 and document["http_port"] == 9000
    if "anonymous_read" in section:
        assert document["dashboard"]["anonymous_read"] is True


@pytest.mark.parametrize(
    ("before", "after"), [(0o644, 0o640), (0o666, 0o640), (0o670, 0o640), (0o604, 0o600)]
)
def test_leaves_the_file_unreadable_by_other_users_and_unwritable_by_the_group(
    tmp_path, before, after
):
    path = tmp_path / "edgebox.yaml"
    path.write_text("http_port: 9000\n")
    os.chmod(path, before)
    set_password_hash(path, HASH)
    assert stat.S_IMODE(os.stat(path).st_mode) == after


def test_keeps_the_files_mode(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text("{}\n")
    os.chmod(path, 0o640)
    set_password_hash(path, HASH)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert written(path) == {"dashboard": {"password_hash": HASH}}


def test_passwd_stdin_writes_a_hash_that_verifies(tmp_path, monkeypatch, capsys):
    path = tmp_path / "edgebox.yaml"
    path.write_text("dashboard: {anonymous_read: true}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("a long secret\n"))
    assert main(["passwd", "--config", str(path), "--stdin"]) == 0
    settings = load_settings({}, config_file=path, environ={})
    assert check_password_hash(settings.dashboard.password_hash, "a long secret")
    assert not check_password_hash(settings.dashboard.password_hash, "a long secret\n")
    assert settings.dashboard.anonymous_read
    assert f"password hash written to {path}" in capsys.readouterr().out


def test_passwd_refuses_a_short_password(tmp_path, monkeypatch, capsys):
    path = tmp_path / "edgebox.yaml"
    path.write_text("{}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["passwd", "--config", str(path), "--stdin"]) == 1
    assert capsys.readouterr().err == (
        "edgebox passwd: the password must have at least 8 characters\n"
    )
    assert path.read_text() == "{}\n"


def test_passwd_asks_twice_and_refuses_a_mismatch(tmp_path, monkeypatch, capsys):
    path = tmp_path / "edgebox.yaml"
    path.write_text("{}\n")
    answers = iter(["first password", "second password"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    assert main(["passwd", "--config", str(path)]) == 1
    assert capsys.readouterr().err == "edgebox passwd: the passwords differ; nothing written\n"


def test_passwd_names_a_config_file_it_cannot_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("a long secret\n"))
    missing = tmp_path / "nope" / "edgebox.yaml"
    assert main(["passwd", "--config", str(missing), "--stdin"]) == 1
    assert capsys.readouterr().err.startswith(f"edgebox passwd: cannot read '{missing}': ")


def test_a_file_only_its_owner_and_the_daemons_group_read_is_not_exposed(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text("{}\n")
    os.chmod(path, 0o640)
    os.chown(path, -1, os.getegid())
    assert exposure(path) is None


def test_a_file_every_user_reads_is_exposed_and_the_fix_is_named(tmp_path):
    path = tmp_path / "edgebox.yaml"
    path.write_text("{}\n")
    os.chmod(path, 0o644)
    assert exposure(path) == (
        f"every local user may read it (mode 0644; fix: sudo chmod o-rwx {path})"
    )
