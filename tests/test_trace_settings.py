"""TraceSettings: Triton's trace extension shape with tracing always off."""

from __future__ import annotations

import pytest

from edgebox.errors import InvalidArgument, Unsupported
from edgebox.trace_settings import TraceSettings
from triton_answers import TRACE_DEFAULTS as TRITON_DEFAULTS


def test_defaults_are_tritons_for_the_server_and_every_model():
    settings = TraceSettings()
    assert settings.current() == TRITON_DEFAULTS
    assert list(settings.current()) == list(TRITON_DEFAULTS)
    assert settings.current("m") == TRITON_DEFAULTS


def test_off_and_numbers_are_kept_and_read_back():
    settings = TraceSettings()
    after = settings.update("", {"trace_level": ["OFF"], "trace_rate": "5", "trace_count": "7"})
    assert after == {**TRITON_DEFAULTS, "trace_rate": "5", "trace_count": "7"}
    assert settings.update("", {"trace_rate": None}) == {**TRITON_DEFAULTS, "trace_count": "7"}


def test_a_model_follows_the_global_settings_until_it_sets_its_own():
    settings = TraceSettings()
    assert settings.update("m", {"trace_rate": ["9"]})["trace_rate"] == "9"
    settings.update("", {"trace_rate": "5", "log_frequency": "2"})
    assert settings.current("m") == {**TRITON_DEFAULTS, "trace_rate": "9", "log_frequency": "2"}
    assert settings.current("other")["trace_rate"] == "5"
    assert settings.update("m", {"trace_rate": []})["trace_rate"] == "5"


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (
            {"trace_level": ["TIMESTAMPS"]},
            Unsupported,
            "trace settings: tracing is not supported by edgebox; 'trace_level' accepts "
            "only ['OFF'], got ['TIMESTAMPS']",
        ),
        (
            {"trace_level": "OFF"},
            InvalidArgument,
            "trace settings: 'trace_level' expected a list of strings, got 'OFF'",
        ),
        (
            {"trace_file": "/tmp/t.json"},
            Unsupported,
            "trace settings: 'trace_file' cannot be changed over the network",
        ),
        (
            {"trace_mode": "opentelemetry"},
            Unsupported,
            "trace settings: 'trace_mode' accepts only 'triton' (tracing is not supported), "
            "got 'opentelemetry'",
        ),
        (
            {"trace_rate": "x"},
            InvalidArgument,
            "trace settings: 'trace_rate' expected an integer >= 0 as a string, got 'x'",
        ),
        (
            {"trace_count": "-2"},
            InvalidArgument,
            "trace settings: 'trace_count' expected an integer >= -1 as a string, got '-2'",
        ),
        (
            {"trace_rate": 5},
            InvalidArgument,
            "trace settings: 'trace_rate' expected a string, got 5",
        ),
        (
            {"trace_rate": ["1", "2"]},
            InvalidArgument,
            "trace settings: 'trace_rate' expected a string, got ['1', '2']",
        ),
        (
            {"rate": "1"},
            InvalidArgument,
            "trace settings: unknown setting 'rate' (known: 'trace_level', 'trace_rate', "
            "'trace_count', 'log_frequency', 'trace_file', 'trace_mode')",
        ),
    ],
)
def test_bad_update_is_refused_whole(changes, error, message):
    settings = TraceSettings()
    with pytest.raises(error) as raised:
        settings.update("", {"log_frequency": "3", **changes})
    assert str(raised.value) == message
    assert settings.current() == TRITON_DEFAULTS


def test_a_models_refusal_names_the_model():
    with pytest.raises(Unsupported) as raised:
        TraceSettings().update("lane", {"trace_level": ["TENSORS"]})
    assert str(raised.value).startswith("model 'lane' trace settings: tracing is not supported")
