"""``GET /api/v1/logs`` and the Logs page: the daemon's recent lines with
level and text filters, only after a login (anonymous_read or not), and no
secret in them (edgebox/log_ring.py, edgebox/dashboard/api.py)."""

from __future__ import annotations

import logging

import pytest
from dashboard_client import dashboard_deps, log_in

from edgebox.log_ring import LogRing

NEEDS_LOGIN = {"error": "the dashboard needs a login (POST /login)"}


@pytest.fixture
def ring():
    """A ring fed by a logger of its own, so other tests' lines stay out."""
    made = LogRing()
    logger = logging.getLogger("edgebox.test_dashboard_logs")
    logger.addHandler(made)
    logger.setLevel(logging.DEBUG)
    yield made
    logger.removeHandler(made)


@pytest.fixture
def logger(ring):
    return logging.getLogger("edgebox.test_dashboard_logs")


@pytest.fixture
def client(make_app, stack, ring):
    made = make_app(deps=dashboard_deps(stack, logs=ring)).test_client()
    assert log_in(made).status_code == 200
    return made


def messages(reply) -> list[str]:
    assert reply.status_code == 200, reply.get_json()
    return [line["message"] for line in reply.get_json()["lines"]]


@pytest.mark.parametrize("anonymous_read", [False, True])
def test_the_logs_need_a_login_even_with_anonymous_read(make_app, stack, ring, anonymous_read):
    client = make_app(deps=dashboard_deps(stack, logs=ring), anonymous_read=anonymous_read)
    client = client.test_client()
    reply = client.get("/api/v1/logs")
    assert (reply.status_code, reply.get_json()) == (401, NEEDS_LOGIN)
    page = client.get("/logs")
    assert page.status_code == 302 and page.headers["Location"] == "/login?next=/logs"


def test_the_logs_page_is_served_after_a_login(client):
    assert b"page=logs user=admin" in client.get("/logs").data


def test_lines_at_a_level_and_above_holding_a_text_newest_last(client, logger):
    logger.info("lane: loaded")
    logger.warning("lane: slow frame")
    logger.warning("cam: reconnecting")
    logger.error("LANE: failed")
    reply = client.get("/api/v1/logs?level=warning&q=Lane")
    assert messages(reply) == ["lane: slow frame", "LANE: failed"]
    line = reply.get_json()["lines"][-1]
    assert (line["level"], line["logger"]) == ("ERROR", "edgebox.test_dashboard_logs")


def test_limit_answers_the_newest_lines(client, logger):
    for number in range(5):
        logger.info("line %d", number)
    assert messages(client.get("/api/v1/logs?limit=2")) == ["line 3", "line 4"]


def test_a_password_logged_never_reaches_the_api(client, logger):
    logger.error("cannot open rtsp://cam:hunter2secret@10.0.0.8/ password=hunter2secret")
    reply = client.get("/api/v1/logs?q=cannot")
    assert messages(reply) == ["cannot open rtsp://cam:***@10.0.0.8/ password=***"]
    assert b"hunter2secret" not in client.get("/api/v1/logs").data


@pytest.mark.parametrize(
    ("query", "error"),
    [
        (
            "level=LOUD",
            "'level': expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'LOUD'",
        ),
        ("limit=0", "'limit': expected a number of lines 1..2000, got '0'"),
        ("limit=many", "'limit': expected a number of lines 1..2000, got 'many'"),
        ("q=" + "x" * 201, "'q': expected at most 200 characters"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(client, query, error):
    reply = client.get(f"/api/v1/logs?{query}")
    assert (reply.status_code, reply.get_json()) == (400, {"error": error})


def test_without_a_ring_the_answer_says_no_lines_are_kept(make_app):
    client = make_app().test_client()
    assert log_in(client).status_code == 200
    reply = client.get("/api/v1/logs")
    assert reply.get_json() == {"lines": [], "reason": "log lines are not kept by this process"}
