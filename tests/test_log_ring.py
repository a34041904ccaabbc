"""The Logs page's memory: bounded by records and characters, each line cut,
secrets masked before they are kept, filtered by level and text."""

from __future__ import annotations

import logging

import pytest

from edgebox.log_ring import CUT, LogRing


@pytest.fixture
def logger():
    """A logger of its own feeding nothing but the ring under test."""
    made = logging.getLogger("edgebox.test_log_ring")
    made.propagate = False
    made.setLevel(logging.DEBUG)
    yield made
    made.handlers.clear()
    made.propagate = True


def attach(logger: logging.Logger, ring: LogRing) -> LogRing:
    logger.addHandler(ring)
    return ring


def test_keeps_at_most_max_records_dropping_the_oldest(logger):
    ring = attach(logger, LogRing(max_records=3))
    for number in range(5):
        logger.info("line %d", number)
    assert [line.message for line in ring.lines()] == ["line 2", "line 3", "line 4"]


def test_keeps_at_most_max_chars_dropping_the_oldest(logger):
    ring = attach(logger, LogRing(max_chars=25))
    for number in range(4):
        logger.info("ten chars%d", number)
    assert [line.message for line in ring.lines()] == ["ten chars2", "ten chars3"]


def test_cuts_a_long_line(logger):
    ring = attach(logger, LogRing(max_line_chars=40))
    logger.info("x" * 500)
    [line] = ring.lines()
    assert len(line.message) == 40 and line.message.endswith(CUT)


def test_a_password_in_a_message_or_traceback_is_never_kept(logger):
    ring = attach(logger, LogRing())
    logger.warning("opening rtsp://cam:hunter2secret@10.0.0.8/live password=hunter2secret")
    try:
        raise ValueError("token=hunter2secret refused")
    except ValueError:
        logger.exception("stream failed")
    kept = " ".join(line.message for line in ring.lines())
    assert "hunter2secret" not in kept
    assert "rtsp://cam:***@10.0.0.8" in kept and "token=***" in kept


def test_a_secret_past_the_cut_is_masked_before_the_cut(logger):
    ring = attach(logger, LogRing(max_line_chars=30))
    logger.info("xxxxx rtsp://cam:hunter2secret@host/a/long/path")
    assert "hunter2" not in ring.lines()[0].message


def test_a_bad_format_string_is_kept_as_text():
    ring = LogRing()
    ring.handle(logging.makeLogRecord({"msg": "%d models", "args": ("three",), "levelno": 20}))
    assert "three" in ring.lines()[0].message


def test_filters_by_lowest_level_and_text_in_any_case_newest_last(logger):
    ring = attach(logger, LogRing())
    logger.debug("Dashboard: debug")
    logger.info("Dashboard: login ok from=10.0.0.3")
    logger.warning("Dashboard: login refused from=10.0.0.9")
    logger.warning("stream lane: reconnecting")
    logger.error("Dashboard: cannot listen")
    warnings = ring.lines(logging.WARNING, "dashboard:")
    assert [line.message for line in warnings] == [
        "Dashboard: login refused from=10.0.0.9",
        "Dashboard: cannot listen",
    ]
    assert [line.level for line in warnings] == ["WARNING", "ERROR"]


def test_text_matches_the_logger_name_too(logger):
    ring = attach(logger, LogRing())
    logger.info("something")
    assert len(ring.lines(text="TEST_LOG_RING")) == 1
    assert ring.lines(text="elsewhere") == []


def test_limit_keeps_the_newest(logger):
    ring = attach(logger, LogRing())
    for number in range(10):
        logger.info("line %d", number)
    assert [line.message for line in ring.lines(limit=2)] == ["line 8", "line 9"]
    assert [line.id for line in ring.lines(limit=2)] == [9, 10]
