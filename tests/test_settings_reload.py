"""Comparing the settings a SIGHUP read with those the daemon runs on: which
changed fields apply live, which wait for a restart, and what the daemon runs
on afterwards."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgebox.mqtt.settings import MqttSettings
from edgebox.settings import Settings
from edgebox.settings_reload import compare, restart_warning


def test_live_fields_take_new_values_and_restart_fields_keep_the_old_ones():
    current = Settings(mqtt=MqttSettings(url="mqtt://a:1883", spool_path=Path("/tmp/one")))
    new = Settings(
        http_port=9000,
        log_verbose=1,
        mqtt=MqttSettings(url="mqtt://b:1883", spool_path=Path("/tmp/two")),
    )

    change = compare(current, new)

    assert change.live == ("log_verbose", "mqtt.url")
    assert change.restart == ("http_port", "mqtt.spool_path")
    assert change.applied.http_port == 8000
    assert change.applied.log_verbose == 1
    assert change.applied.mqtt == MqttSettings(url="mqtt://b:1883", spool_path=Path("/tmp/one"))


def test_turning_a_section_on_or_off_needs_a_restart():
    current = Settings()
    change = compare(current, replace(current, mqtt=MqttSettings()))
    assert (change.live, change.restart) == ((), ("mqtt",))
    assert change.applied.mqtt is None


def test_unchanged_settings_change_nothing():
    change = compare(Settings(), Settings())
    assert (change.live, change.restart) == ((), ())


def test_the_restart_warning_names_every_field_in_one_line():
    assert (
        restart_warning(("http_port", "grpc_port"))
        == "settings 'http_port', 'grpc_port' changed; they take effect after a restart"
    )
    assert (
        restart_warning(("dashboard.port",))
        == "setting 'dashboard.port' changed; it takes effect after a restart"
    )
