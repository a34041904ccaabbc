"""The ``alerts:`` section: on by default with every rule on, set field by
field from any layer, and every mistake named with its source and, from
the file, its line (edgebox/alerts/settings.py)."""

from __future__ import annotations

import pytest

from edgebox.alerts.settings import AlertSettings
from edgebox.settings import Settings, SettingsError, load_settings


def test_alerts_are_on_with_every_rule_when_no_layer_mentions_them():
    alerts = load_settings({}, environ={}).alerts
    assert alerts == AlertSettings() == Settings().alerts
    switches = ("temperature", "throttling", "memory", "stream_down", "model_unavailable")
    assert alerts.enabled and all(getattr(alerts, name) for name in switches)
    assert alerts.rollout_rejected and alerts.mqtt_offline and alerts.spool


def test_yaml_environment_and_flag_each_set_one_field_and_a_rule_turns_off(tmp_path):
    config = tmp_path / "edgebox.yaml"
    config.write_text(
        "alerts:\n  memory: false\n  temperature_zone_max_c: {gpu: 85, tj: 95.5}\n",
        encoding="utf-8",
    )
    loaded = load_settings(
        {"alerts_stream_down_after_s": "10"},
        config_file=config,
        environ={"EDGEBOX_ALERTS_TEMPERATURE_WARN_C": "70"},
    )
    assert loaded.alerts == AlertSettings(
        memory=False,
        temperature_zone_max_c=("gpu=85", "tj=95.5"),
        stream_down_after_s=10.0,
        temperature_warn_c=70.0,
    )
    assert loaded.alerts.zone_max_c == {"gpu": 85.0, "tj": 95.5}
    assert loaded.sources["alerts.stream_down_after_s"] == "--alerts-stream-down-after-s"


def test_zone_limits_from_text_or_a_list_read_the_same():
    from_text = load_settings(
        {}, environ={"EDGEBOX_ALERTS_TEMPERATURE_ZONE_MAX_C": "gpu=85,cv0=70"}
    )
    from_list = load_settings({"alerts_temperature_zone_max_c": ["gpu=85", "cv0=70"]}, environ={})
    assert from_text.alerts.zone_max_c == from_list.alerts.zone_max_c == {"gpu": 85.0, "cv0": 70.0}


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        (
            "alerts:\n  memory_warn_pct: 95\n  memory_critical_pct: 92\n",
            "setting 'alerts.memory_critical_pct' from {file}:3: "
            "expected more than memory_warn_pct (95), got 92",
        ),
        (
            "alerts:\n  interval_s: 0\n",
            "setting 'alerts.interval_s' from {file}:2: expected 0.2..60 seconds, got 0",
        ),
        (
            "alerts:\n  temperature: maybe\n",
            "setting 'alerts.temperature' from {file}:2: expected bool, got 'maybe'",
        ),
        (
            "alerts:\n  enabled: true\n  temperature_zone_max_c:\n    gpu: hot\n",
            "setting 'alerts.temperature_zone_max_c' from {file}:3: "
            "expected ZONE=C (e.g. gpu=85), got 'gpu=hot'",
        ),
        (
            "alerts:\n  temperature_zone_max_c: [gpu=85, gpu=90]\n",
            "setting 'alerts.temperature_zone_max_c' from {file}:2: zone 'gpu' is given twice",
        ),
        (
            "alerts:\n  temperature_zone_max_c: [gpu=400]\n",
            "setting 'alerts.temperature_zone_max_c' from {file}:2: "
            "zone 'gpu': expected -40..150 °C, got 400",
        ),
        (
            "alerts:\n  spool_warn_pct: 120\n",
            "setting 'alerts.spool_warn_pct' from {file}:2: "
            "expected a percentage in (0, 100], got 120",
        ),
        (
            "alerts:\n\n  mqtt_offline_after_s: -1\n",
            "setting 'alerts.mqtt_offline_after_s' from {file}:3: "
            "expected 0..86400 seconds, got -1",
        ),
        (
            "alerts:\n  memory_clear_pct: 60\n",
            "setting 'alerts.memory_clear_pct' from {file}:2: expected 0..50, got 60",
        ),
        (
            "alerts:\n  temprature_warn_c: 70\n",
            "setting 'alerts' from {file}:1: unknown key 'temprature_warn_c'; "
            "did you mean 'temperature_warn_c'?",
        ),
    ],
)
def test_a_wrong_value_stops_startup_naming_the_field_the_file_and_the_line(
    tmp_path, yaml, message
):
    config = tmp_path / "edgebox.yaml"
    config.write_text(yaml, encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, config_file=config, environ={})
    assert str(caught.value) == message.format(file=config)


def test_a_wrong_value_from_the_environment_names_the_variable():
    with pytest.raises(SettingsError) as caught:
        load_settings({}, environ={"EDGEBOX_ALERTS_TEMPERATURE_CRITICAL_C": "70"})
    assert str(caught.value) == (
        "setting 'alerts.temperature_critical_c' from EDGEBOX_ALERTS_TEMPERATURE_CRITICAL_C: "
        "expected more than temperature_warn_c (80), got 70"
    )
