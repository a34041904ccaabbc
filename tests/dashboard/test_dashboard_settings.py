"""The ``dashboard:`` section: on by default, merged field by field across the
YAML file, the environment and flags, and checked at startup."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.cli import build_parser
from edgebox.dashboard.settings import DEFAULT_SESSION_KEY_PATH, DashboardSettings
from edgebox.settings import Settings, SettingsError, load_settings

HASH = "scrypt:32768:8:1$salt$" + "ab" * 32


def load(tmp_path: Path, text: str = "{}\n", flags=None, environ=None) -> Settings:
    path = tmp_path / "edgebox.yaml"
    path.write_text(text)
    return load_settings(flags or {}, config_file=path, environ=environ or {})


def test_dashboard_is_on_by_default_on_port_8080(tmp_path):
    settings = load(tmp_path)
    assert settings.dashboard == DashboardSettings()
    assert settings.dashboard.enabled
    assert settings.dashboard.port == 8080
    assert not settings.dashboard.anonymous_read
    assert settings.dashboard.resolved_session_key_path == DEFAULT_SESSION_KEY_PATH


def test_yaml_section_sets_only_the_fields_given(tmp_path):
    settings = load(tmp_path, "dashboard: {anonymous_read: true}\n")
    assert settings.dashboard == DashboardSettings(anonymous_read=True)
    assert settings.sources["dashboard.anonymous_read"] == str(tmp_path / "edgebox.yaml")


def test_flag_and_environment_set_single_fields(tmp_path):
    settings = load(
        tmp_path,
        "dashboard:\n  port: 9000\n  anonymous_read: true\n",
        flags={"dashboard_port": "0"},
        environ={"EDGEBOX_DASHBOARD_MAX_LOGIN_ATTEMPTS_PER_MINUTE": "3"},
    )
    assert settings.dashboard == DashboardSettings(
        port=0, anonymous_read=True, max_login_attempts_per_minute=3
    )
    assert settings.sources["dashboard.port"] == "--dashboard-port"


def test_dashboard_port_flag_exists():
    args = build_parser().parse_args(["serve", "--dashboard-port", "0"])
    assert args.dashboard_port == "0"


def test_bad_port_stops_startup_with_the_setting_and_its_line(tmp_path):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, "dashboard:\n  port: 70000\n")
    assert str(caught.value) == (
        f"setting 'dashboard.port' from {tmp_path / 'edgebox.yaml'}:2: "
        "expected 0..65535 (0: any free port), got 70000"
    )


def test_a_password_in_place_of_its_hash_is_refused(tmp_path):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, "dashboard:\n  password_hash: hunter22\n")
    message = str(caught.value)
    assert message.startswith("setting 'dashboard.password_hash' from ")
    assert message.endswith(
        "expected a hash written by 'edgebox passwd' (scrypt:... or pbkdf2:...), not a password"
    )
    assert "hunter22" not in message


def test_a_hash_is_accepted(tmp_path):
    assert load(tmp_path, f'dashboard:\n  password_hash: "{HASH}"\n').dashboard.password_hash == (
        HASH
    )


def test_dashboard_port_must_differ_from_the_http_port(tmp_path):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, "http_port: 8080\n")
    assert str(caught.value) == (
        "setting 'dashboard.port' (default): must differ from http_port, grpc_port and "
        "metrics_port, got 8080"
    )


def test_disabled_dashboard_may_share_nothing_but_is_not_checked(tmp_path):
    settings = load(tmp_path, "http_port: 8080\ndashboard: {enabled: false}\n")
    assert not settings.dashboard.enabled


def test_any_free_port_for_every_service_is_allowed(tmp_path):
    settings = load(tmp_path, "http_port: 0\ngrpc_port: 0\ndashboard: {port: 0}\n")
    assert settings.dashboard.port == 0


def test_dashboard_port_must_differ_from_the_metrics_port(tmp_path):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, "dashboard: {port: 9100}\nmetrics_port: 9100\n")
    assert str(caught.value).startswith("setting 'dashboard.port' (")
    assert str(caught.value).endswith(
        "must differ from http_port, grpc_port and metrics_port, got 9100"
    )


def test_sessions_last_30_idle_minutes_and_12_hours_at_most_by_default(tmp_path):
    settings = load(tmp_path).dashboard
    assert (settings.session_idle_timeout_s, settings.session_lifetime_s) == (1800.0, 43200.0)
    assert settings.resolved_session_epoch_path == Path("/var/lib/edgebox/dashboard/session.epoch")


def test_session_timeouts_have_flags_and_variables(tmp_path):
    settings = load(
        tmp_path,
        flags={"dashboard_session_idle_timeout_s": "300"},
        environ={"EDGEBOX_DASHBOARD_SESSION_LIFETIME_S": "3600"},
    )
    assert settings.dashboard == DashboardSettings(
        session_idle_timeout_s=300.0, session_lifetime_s=3600.0
    )
    args = build_parser().parse_args(
        [
            "serve",
            "--dashboard-session-idle-timeout-s",
            "60",
            "--dashboard-session-lifetime-s",
            "60",
        ]
    )
    assert (args.dashboard_session_idle_timeout_s, args.dashboard_session_lifetime_s) == (
        "60",
        "60",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "dashboard: {session_lifetime_s: 0}\n",
            "setting 'dashboard.session_lifetime_s' from {file}:1: "
            "expected seconds in (0, 2678400] (31 days), got 0",
        ),
        (
            "dashboard: {session_idle_timeout_s: 50000}\n",
            "setting 'dashboard.session_idle_timeout_s' from {file}:1: "
            "expected seconds in (0, session_lifetime_s = 43200], got 50000",
        ),
    ],
)
def test_session_timeouts_out_of_range_stop_startup(tmp_path, text, message):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, text)
    assert str(caught.value) == message.format(file=tmp_path / "edgebox.yaml")
