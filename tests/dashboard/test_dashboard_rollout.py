"""A rollout through the dashboard's API (GET /api/v1/models/<name>/rollout,
POST /api/v1/models/<name>/rollout/<action>) on a real shadow rollout in the
in-process stack: the resource, promote, abort and release acting for real,
4xx refusals with the reason, login and CSRF, and the WARNING line naming
who did it."""

from __future__ import annotations

import logging

import pytest
from dashboard_client import log_in, post
from rollout_setup import DISAGREEMENT, SAMPLES_WANTED, answer_requests

from model_fixtures import add_python_xy

AUDIT = "edgebox.dashboard.audit"
NO_CSRF = {"error": "missing or wrong CSRF token (header X-CSRF-Token)"}
ACTION_NEEDS_LOGIN = {"error": "this action needs a login: log in as 'admin' first"}
NO_TOTALS = {
    "samples": 0,
    "dropped": 0,
    "promoted": 0,
    "rejected": 0,
    "rolled_back": 0,
    "quarantined": 0,
}


@pytest.fixture
def client(model_in_rollout, make_app):
    client = make_app().test_client()
    log_in(client)
    return client


@pytest.fixture
def audit_lines(caplog):
    caplog.set_level(logging.INFO, logger=AUDIT)

    def lines() -> list[tuple[int, str]]:
        return [
            (r.levelno, r.getMessage())
            for r in caplog.records
            if r.name == AUDIT and "Dashboard: rollout" in r.getMessage()
        ]

    return lines


def resource(client, name: str = "xy") -> dict:
    reply = client.get(f"/api/v1/models/{name}/rollout")
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def served_states(stack) -> dict[str, str]:
    return {
        entry.version: entry.state.value
        for entry in stack.repository_control.repository_index()
        if entry.name == "xy" and entry.version is not None
    }


def test_the_resource_shows_the_new_version_against_the_serving_one(stack, client):
    answer_requests(stack, 3)
    document = resource(client)
    assert document == stack.repository_control.rollout_status("xy")
    assert {key: document[key] for key in ("model", "stage", "policy", "version")} == {
        "model": "xy",
        "stage": "shadow",
        "policy": "shadow",
        "version": 2,
    }
    assert (document["serving_version"], document["samples"], document["samples_wanted"]) == (
        1,
        3,
        SAMPLES_WANTED,
    )
    assert (document["agreed"], document["agreement"], document["errors"]) == (0, 0.0, 0)
    assert (document["dropped"], document["last_disagreement"]) == (0, DISAGREEMENT)
    assert document["candidate_p95_ms"] > 0
    assert document["serving_p95_ms"] > 0
    assert document["gates"]["samples"] == SAMPLES_WANTED
    assert document["held"] == []
    assert "watch" not in document
    assert "last" not in document


def test_the_models_answer_carries_each_models_rollout(tmp_path, stack, client):
    add_python_xy(tmp_path, "steady")
    stack.repository_control.load_model("steady")
    by_name = {m["name"]: m for m in client.get("/api/v1/models").get_json()["models"]}
    assert by_name["xy"]["rollout"] == resource(client)
    assert by_name["xy"]["rollout"]["stage"] == "shadow"
    assert by_name["steady"]["rollout"] == {
        "model": "steady",
        "stage": "none",
        "totals": NO_TOTALS,
        "held": [],
    }


def test_promote_serves_the_new_version_under_watch_and_is_audited(stack, client, audit_lines):
    reply = post(client, "/api/v1/models/xy/rollout/promote")
    assert reply.status_code == 200
    document = reply.get_json()
    assert (document["stage"], document["version"], document["serving_version"]) == (
        "watching",
        2,
        1,
    )
    assert set(document["watch"]) == {"until", "requests", "errors", "p95_ms"}
    assert document["last"]["result"] == "promoted"
    assert document["last"]["reason"] == "promoted by the operator"
    assert served_states(stack) == {"1": "READY", "2": "READY"}
    assert stack.infer("xy").model_version == "2"
    assert audit_lines() == [
        (
            logging.WARNING,
            "Dashboard: rollout promote user=admin from=127.0.0.1 model=xy version=2 result=ok",
        )
    ]


def test_abort_holds_the_new_version_and_release_rolls_it_out_again(stack, client, audit_lines):
    reply = post(client, "/api/v1/models/xy/rollout/abort")
    assert reply.status_code == 200
    document = reply.get_json()
    assert document["stage"] == "none"
    [held] = document["held"]
    assert (held["version"], held["kind"], held["reason"]) == (
        2,
        "rejected",
        "rollout: aborted by the operator",
    )
    assert document["last"]["result"] == "rejected"
    assert served_states(stack) == {"1": "READY", "2": "UNAVAILABLE"}

    reply = post(client, "/api/v1/models/xy/rollout/release")
    assert reply.status_code == 200
    document = reply.get_json()
    assert (document["stage"], document["version"], document["held"]) == ("shadow", 2, [])
    assert audit_lines() == [
        (
            logging.WARNING,
            "Dashboard: rollout abort user=admin from=127.0.0.1 model=xy version=2 result=ok",
        ),
        (
            logging.WARNING,
            "Dashboard: rollout release user=admin from=127.0.0.1 model=xy result=ok released=2",
        ),
    ]


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        (
            "GET",
            "/api/v1/models/missing/rollout",
            404,
            "unknown model 'missing': no such model folder",
        ),
        (
            "POST",
            "/api/v1/models/missing/rollout/promote",
            404,
            "unknown model 'missing': no such model folder",
        ),
        (
            "POST",
            "/api/v1/models/steady/rollout/promote",
            400,
            "model 'steady': no rollout in progress",
        ),
        (
            "POST",
            "/api/v1/models/steady/rollout/abort",
            400,
            "model 'steady': no rollout in progress",
        ),
        ("POST", "/api/v1/models/xy/rollout/release", 404, "model 'xy': no version is held"),
        (
            "POST",
            "/api/v1/models/xy/rollout/restart",
            400,
            "rollout action 'restart': expected one of promote, abort, release",
        ),
        (
            "GET",
            "/api/v1/models/../rollout",
            400,
            "model name '..': expected a single folder name (not '.' or '..', without '/' or NUL)",
        ),
        (
            "POST",
            "/api/v1/models/../rollout/abort",
            400,
            "model name '..': expected a single folder name (not '.' or '..', without '/' or NUL)",
        ),
    ],
)
def test_refusals_answer_4xx_with_the_reason_and_change_nothing(
    tmp_path, stack, client, method, path, status, message
):
    add_python_xy(tmp_path, "steady")
    stack.repository_control.load_model("steady")
    reply = client.get(path) if method == "GET" else post(client, path)
    assert (reply.status_code, reply.get_json()) == (status, {"error": message})
    document = resource(client)
    assert (document["stage"], document["version"], document["held"]) == ("shadow", 2, [])


def test_a_refused_action_is_audited_as_failed_and_its_text_cannot_forge_a_line(
    client, audit_lines
):
    post(client, "/api/v1/models/xy/rollout/release")
    post(client, "/api/v1/models/xy/rollout/x%0ADashboard:%20rollout%20promote")
    assert audit_lines() == [
        (
            logging.WARNING,
            "Dashboard: rollout release user=admin from=127.0.0.1 model=xy result=failed "
            "error=\"model 'xy': no version is held\"",
        ),
        (
            logging.WARNING,
            'Dashboard: rollout user=admin from=127.0.0.1 model=xy asked="x\\nDashboard: '
            'rollout promote" result=failed error="rollout action \'x\\\\nDashboard: rollout '
            "promote': expected one of promote, abort, release\"",
        ),
    ]


def test_actions_need_a_login_and_the_csrf_token(model_in_rollout, make_app, audit_lines):
    client = make_app(anonymous_read=True).test_client()
    assert resource(client)["stage"] == "shadow"
    for action in ("promote", "abort", "release"):
        refused = post(client, f"/api/v1/models/xy/rollout/{action}")
        assert (refused.status_code, refused.get_json()) == (403, ACTION_NEEDS_LOGIN)
    log_in(client)
    for action in ("promote", "abort", "release"):
        no_token = client.post(f"/api/v1/models/xy/rollout/{action}")
        assert (no_token.status_code, no_token.get_json()) == (403, NO_CSRF)
    assert resource(client)["stage"] == "shadow"
    assert audit_lines() == []


def test_the_resource_needs_a_login_without_anonymous_read(model_in_rollout, make_app):
    client = make_app().test_client()
    reply = client.get("/api/v1/models/xy/rollout")
    assert (reply.status_code, reply.get_json()) == (
        401,
        {"error": "the dashboard needs a login (POST /login)"},
    )
    log_in(client)
    assert resource(client)["stage"] == "shadow"
