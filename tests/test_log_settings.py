"""LogSettings: Triton's logging extension values, checked updates, and their
effect on the ``edgebox`` logger tree (and on nothing else)."""

from __future__ import annotations

import logging

import pytest

from edgebox.errors import InvalidArgument, Unsupported
from edgebox.log_settings import LogSettings
from triton_answers import LOG_DEFAULTS as TRITON_DEFAULTS


@pytest.fixture
def restored_logging():
    """Puts the edgebox logger level and the root handlers' filters back."""
    logger = logging.getLogger("edgebox")
    level = logger.level
    root_handlers = logging.getLogger().handlers
    filters = {handler: list(handler.filters) for handler in root_handlers}
    yield
    logger.setLevel(level)
    for handler, saved in filters.items():
        handler.filters[:] = saved


@pytest.fixture
def captured(restored_logging):
    """A root handler that records what gets through, as the daemon's stderr handler would."""

    class Recorder(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    recorder = Recorder()
    root = logging.getLogger()
    root.addHandler(recorder)
    yield recorder
    root.removeHandler(recorder)


def emitted(recorder, logger_name: str) -> list[str]:
    recorder.records.clear()
    logger = logging.getLogger(logger_name)
    logger.debug("d")
    logger.info("i")
    logger.warning("w")
    logger.error("e")
    return [record.getMessage() for record in recorder.records]


def test_defaults_are_tritons_in_tritons_key_order():
    settings = LogSettings(verbose_level=0)
    assert settings.current() == TRITON_DEFAULTS
    assert list(settings.current()) == list(TRITON_DEFAULTS)


def test_initial_verbose_level_follows_what_logging_does_at_start(restored_logging):
    logging.getLogger("edgebox").setLevel(logging.DEBUG)
    assert LogSettings().current()["log_verbose_level"] == 1
    logging.getLogger("edgebox").setLevel(logging.INFO)
    assert LogSettings().current()["log_verbose_level"] == 0


def test_partial_update_changes_only_its_keys_and_none_changes_nothing(restored_logging):
    settings = LogSettings(verbose_level=0)
    after = settings.update({"log_verbose_level": 2, "log_info": None})
    assert after == {**TRITON_DEFAULTS, "log_verbose_level": 2}
    assert settings.update({}) == after


def test_verbose_level_turns_debug_on_for_the_edgebox_tree_only(captured):
    settings = LogSettings(verbose_level=0)
    logging.getLogger("edgebox").setLevel(logging.INFO)
    assert emitted(captured, "edgebox.lifecycle.manager") == ["i", "w", "e"]
    settings.update({"log_verbose_level": 1})
    assert emitted(captured, "edgebox.lifecycle.manager") == ["d", "i", "w", "e"]
    settings.update({"log_verbose_level": 0})
    assert emitted(captured, "edgebox.lifecycle.manager") == ["i", "w", "e"]


def test_info_warning_error_switch_their_own_levels(captured):
    settings = LogSettings(verbose_level=0)
    settings.update({"log_info": False})
    assert emitted(captured, "edgebox.grpc") == ["w", "e"]
    settings.update({"log_info": True, "log_warning": False})
    assert emitted(captured, "edgebox.grpc") == ["i", "e"]
    settings.update({"log_warning": True, "log_error": False})
    assert emitted(captured, "edgebox") == ["i", "w"]
    other = logging.getLogger("not_edgebox_lib")
    other.setLevel(logging.INFO)
    try:
        assert emitted(captured, "not_edgebox_lib") == ["i", "w", "e"]
    finally:
        other.setLevel(logging.NOTSET)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (
            {"log_file": "/tmp/x.log"},
            Unsupported,
            "log settings: 'log_file' cannot be changed over the network "
            "(edgebox logs to stderr, the journal under systemd)",
        ),
        (
            {"log_file": ""},
            Unsupported,
            "log settings: 'log_file' cannot be changed over the network "
            "(edgebox logs to stderr, the journal under systemd)",
        ),
        (
            {"log_info": "yes"},
            InvalidArgument,
            "log settings: 'log_info' expected true or false, got 'yes'",
        ),
        (
            {"log_verbose_level": -1},
            InvalidArgument,
            "log settings: 'log_verbose_level' expected an integer >= 0, got -1",
        ),
        (
            {"log_verbose_level": True},
            InvalidArgument,
            "log settings: 'log_verbose_level' expected an integer >= 0, got True",
        ),
        (
            {"log_verbose_level": 1.5},
            InvalidArgument,
            "log settings: 'log_verbose_level' expected an integer >= 0, got 1.5",
        ),
        (
            {"log_format": "ISO8601"},
            Unsupported,
            "log settings: 'log_format' 'ISO8601' is not supported; edgebox writes only 'default'",
        ),
        (
            {"log_format": "bogus"},
            InvalidArgument,
            "log settings: 'log_format' expected 'default', got 'bogus'",
        ),
        (
            {"log_level": 1},
            InvalidArgument,
            "log settings: unknown setting 'log_level' (known: 'log_file', 'log_info', "
            "'log_warning', 'log_error', 'log_verbose_level', 'log_format')",
        ),
    ],
)
def test_bad_update_is_refused_whole(restored_logging, changes, error, message):
    settings = LogSettings(verbose_level=0)
    with pytest.raises(error) as raised:
        settings.update({"log_verbose_level": 3, **changes})
    assert str(raised.value) == message
    assert settings.current() == TRITON_DEFAULTS
