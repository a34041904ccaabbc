"""The ``telemetry:`` section: on by default (unlike ``mqtt:``), each field
settable alone from any layer, and wrong values stop startup naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.settings import Settings, SettingsError, load_settings
from edgebox.telemetry.settings import TelemetrySettings


def test_telemetry_is_on_with_the_defaults_when_no_layer_mentions_it():
    assert Settings().telemetry == TelemetrySettings()
    loaded = load_settings({}, environ={})
    assert loaded.telemetry == TelemetrySettings(
        source="auto",
        sysfs_root=Path("/"),
        interval_s=1.0,
        history_s=900.0,
        thermal_warn_c=85.0,
        thermal_critical_c=95.0,
        hysteresis_c=5.0,
        mqtt_interval_s=10.0,
    )


def test_yaml_environment_and_flag_each_set_one_field(tmp_path):
    config = tmp_path / "edgebox.yaml"
    config.write_text("telemetry:\n  interval_s: 0.5\n  sysfs_root: /host\n", encoding="utf-8")
    loaded = load_settings(
        {"telemetry_mqtt_interval_s": "0"},
        config_file=config,
        environ={"EDGEBOX_TELEMETRY_SOURCE": "psutil"},
    )
    assert loaded.telemetry == TelemetrySettings(
        source="psutil", sysfs_root=Path("/host"), interval_s=0.5, mqtt_interval_s=0.0
    )
    assert loaded.sources == {
        "telemetry.interval_s": str(config),
        "telemetry.sysfs_root": str(config),
        "telemetry.source": "EDGEBOX_TELEMETRY_SOURCE",
        "telemetry.mqtt_interval_s": "--telemetry-mqtt-interval-s",
    }


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"EDGEBOX_TELEMETRY_SOURCE": "nvml"},
            "setting 'telemetry.source' from EDGEBOX_TELEMETRY_SOURCE: expected one of "
            "auto, jtop, sysfs, psutil, got 'nvml'",
        ),
        (
            {"EDGEBOX_TELEMETRY_THERMAL_CRITICAL_C": "80"},
            "setting 'telemetry.thermal_critical_c' from EDGEBOX_TELEMETRY_THERMAL_CRITICAL_C: "
            "expected more than thermal_warn_c (85.0), got 80.0",
        ),
        (
            {"EDGEBOX_TELEMETRY_INTERVAL_S": "0"},
            "setting 'telemetry.interval_s' from EDGEBOX_TELEMETRY_INTERVAL_S: "
            "expected 0.1..60 seconds, got 0.0",
        ),
        (
            {"EDGEBOX_TELEMETRY_HISTORY_S": "0.5"},
            "setting 'telemetry.history_s' from EDGEBOX_TELEMETRY_HISTORY_S: "
            "expected interval_s (1.0) .. 100000 samples (100000) seconds, got 0.5",
        ),
        (
            {"EDGEBOX_TELEMETRY_MQTT_INTERVAL_S": "-1"},
            "setting 'telemetry.mqtt_interval_s' from EDGEBOX_TELEMETRY_MQTT_INTERVAL_S: "
            "expected a number >= 0 (0: none), got -1.0",
        ),
    ],
)
def test_a_wrong_value_stops_startup_naming_the_field_and_its_source(environ, message):
    with pytest.raises(SettingsError) as caught:
        load_settings({}, environ=environ)
    assert str(caught.value) == message
