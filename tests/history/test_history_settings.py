"""The ``history:`` section: on by default, read field by field from every
layer, each bound checked with the setting's name and source."""

from __future__ import annotations

import dataclasses

import pytest

from edgebox.history.settings import HistorySettings
from edgebox.settings import SettingsError, load_settings
from field_docstrings import documented_fields


def test_on_by_default_with_documented_fields():
    settings = load_settings({}, config_file=None, environ={})
    assert settings.history == HistorySettings(True, 5.0, 32, 300.0)
    assert documented_fields(HistorySettings) == {
        f.name for f in dataclasses.fields(HistorySettings)
    }


def test_fields_come_from_the_environment_and_flags():
    settings = load_settings(
        {"history_persist_interval_s": 600},
        config_file=None,
        environ={"EDGEBOX_HISTORY_ENABLED": "false", "EDGEBOX_HISTORY_MAX_SERIES": "8"},
    )
    assert settings.history == HistorySettings(False, 5.0, 8, 600.0)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "INTERVAL_S",
            "0.5",
            "setting 'history.interval_s' from EDGEBOX_HISTORY_INTERVAL_S: expected 1..20 seconds, got 0.5",
        ),
        (
            "MAX_SERIES",
            "0",
            "setting 'history.max_series' from EDGEBOX_HISTORY_MAX_SERIES: expected 1..256, got 0",
        ),
        (
            "PERSIST_INTERVAL_S",
            "10",
            "setting 'history.persist_interval_s' from EDGEBOX_HISTORY_PERSIST_INTERVAL_S: expected 60..86400 seconds, got 10.0",
        ),
    ],
)
def test_out_of_range_fields_are_refused_by_name(variable, value, message):
    with pytest.raises(SettingsError) as raised:
        load_settings({}, config_file=None, environ={f"EDGEBOX_HISTORY_{variable}": value})
    assert [problem.message for problem in raised.value.problems] == [message]
