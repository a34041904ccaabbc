"""Rollback and restore through the dashboard's API in poll mode
(POST /api/v1/models/<name>/rollback and /restore, GET
/api/v1/version-folders): status codes and messages, login and CSRF, and
the WARNING line naming who did it."""

from __future__ import annotations

import logging

import pytest
from dashboard_client import dashboard_deps, log_in, post

from edgebox.repository_control import RepositoryControl
from model_fixtures import add_add_sub

NO_CSRF = {"error": "missing or wrong CSRF token (header X-CSRF-Token)"}
ACTION_NEEDS_LOGIN = {"error": "this action needs a login: log in as 'admin' first"}


@pytest.fixture
def poll_client(tmp_path, stack, make_app):
    """A logged-in client of a poll-mode dashboard over ``tmp_path``, which
    holds add_sub with versions 1 and 2."""
    add_add_sub(tmp_path, versions=(1, 2))
    poll = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, "poll")
    deps = dashboard_deps(stack, control_mode="poll")
    deps = type(deps)(**{**deps.__dict__, "repository_control": poll})
    client = make_app(deps=deps).test_client()
    log_in(client)
    return client


def folders(client) -> dict:
    reply = client.get("/api/v1/version-folders")
    assert reply.status_code == 200
    return reply.get_json()


def test_rollback_parks_newer_versions_and_restore_brings_them_back(tmp_path, poll_client, caplog):
    assert folders(poll_client) == {
        "models": [{"name": "add_sub", "versions": [1, 2], "rolled_back": []}]
    }
    with caplog.at_level(logging.WARNING, logger="edgebox.dashboard.audit"):
        reply = post(poll_client, "/api/v1/models/add_sub/rollback", json={"version": 1})
    assert (reply.status_code, reply.get_json()) == (
        200,
        {"model": "add_sub", "action": "rollback", "version": 1, "moved": [2]},
    )
    assert (tmp_path / "add_sub" / ".rolled-back" / "2" / "model.onnx").is_file()
    assert not (tmp_path / "add_sub" / "2").exists()
    assert folders(poll_client)["models"] == [
        {"name": "add_sub", "versions": [1], "rolled_back": [2]}
    ]
    assert (
        "Dashboard: rollback user=admin from=127.0.0.1 model=add_sub version=1 result=ok "
        "moved_to_rolled_back=2"
    ) in caplog.messages

    with caplog.at_level(logging.WARNING, logger="edgebox.dashboard.audit"):
        reply = post(poll_client, "/api/v1/models/add_sub/restore")
    assert (reply.status_code, reply.get_json()) == (
        200,
        {"model": "add_sub", "action": "restore", "moved": [2]},
    )
    assert (tmp_path / "add_sub" / "2" / "model.onnx").is_file()
    assert (
        "Dashboard: restore user=admin from=127.0.0.1 model=add_sub result=ok moved_back=2"
    ) in caplog.messages


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        (
            "/api/v1/models/missing/rollback",
            {"version": 1},
            404,
            "unknown model 'missing': no such model folder",
        ),
        (
            "/api/v1/models/add_sub/rollback",
            {"version": 2},
            400,
            "model 'add_sub' rollback: version 2 is the newest version folder; "
            "expected an older one",
        ),
        (
            "/api/v1/models/add_sub/rollback",
            {"version": 5},
            400,
            "model 'add_sub' rollback: version 5 has no version folder; expected one of 1, 2",
        ),
        (
            "/api/v1/models/add_sub/rollback",
            {"version": "../1"},
            400,
            "model 'add_sub' rollback: 'version': expected a version number "
            "(a positive integer without a leading zero), got '../1'",
        ),
        (
            "/api/v1/models/add_sub/rollback",
            {},
            400,
            "model 'add_sub' rollback: 'version': expected a version number "
            "(a positive integer without a leading zero), got None",
        ),
        (
            "/api/v1/models/../rollback",
            {"version": 1},
            400,
            "model name '..': expected a single folder name (not '.' or '..', without '/' or NUL)",
        ),
        (
            "/api/v1/models/.rolled-back/rollback",
            {"version": 1},
            404,
            "unknown model '.rolled-back': no such model folder",
        ),
        (
            "/api/v1/models/add_sub/restore",
            None,
            409,
            "model 'add_sub' restore: nothing to restore (no rolled-back version)",
        ),
    ],
)
def test_refusals_answer_4xx_with_the_reason_and_move_nothing(
    tmp_path, poll_client, path, body, status, message
):
    reply = post(poll_client, path, json=body)
    assert (reply.status_code, reply.get_json()) == (status, {"error": message})
    assert sorted(p.name for p in (tmp_path / "add_sub").iterdir()) == ["1", "2", "config.pbtxt"]


def test_a_body_that_is_not_a_json_object_is_refused(poll_client):
    reply = post(poll_client, "/api/v1/models/add_sub/rollback", data="1")
    assert (reply.status_code, reply.get_json()) == (
        400,
        {"error": "model 'add_sub' rollback: expected a JSON body {\"version\": N}"},
    )


def test_a_parked_folder_in_the_way_answers_409(tmp_path, poll_client):
    (tmp_path / "add_sub" / ".rolled-back" / "2").mkdir(parents=True)
    reply = post(poll_client, "/api/v1/models/add_sub/rollback", json={"version": 1})
    assert (reply.status_code, reply.get_json()) == (
        409,
        {
            "error": "model 'add_sub' rollback: '.rolled-back/2' already exists; "
            "restore it or move it away first"
        },
    )


@pytest.mark.parametrize("mode", ["explicit", "none"])
def test_rollback_and_restore_outside_poll_mode_answer_409(tmp_path, stack, make_app, mode):
    add_add_sub(tmp_path, versions=(1, 2))
    other = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, mode)
    deps = dashboard_deps(stack, control_mode=mode)
    client = make_app(
        deps=type(deps)(**{**deps.__dict__, "repository_control": other})
    ).test_client()
    log_in(client)
    expected = (
        "model rollback and restore need --model-control-mode poll; "
        f"this server runs in '{mode}' mode"
    )
    for path, body in (("rollback", {"version": 1}), ("restore", None)):
        reply = post(client, f"/api/v1/models/add_sub/{path}", json=body)
        assert (reply.status_code, reply.get_json()) == (409, {"error": expected})
    assert (tmp_path / "add_sub" / "2").is_dir()


def test_rollback_needs_a_login_and_the_csrf_token(tmp_path, stack, make_app):
    add_add_sub(tmp_path, versions=(1, 2))
    poll = RepositoryControl(stack.registry, stack.manager, stack.dataplane.live, "poll")
    deps = dashboard_deps(stack, control_mode="poll")
    client = make_app(
        deps=type(deps)(**{**deps.__dict__, "repository_control": poll}), anonymous_read=True
    ).test_client()
    for action in ("rollback", "restore"):
        refused = post(client, f"/api/v1/models/add_sub/{action}", json={"version": 1})
        assert (refused.status_code, refused.get_json()) == (403, ACTION_NEEDS_LOGIN)
    log_in(client)
    for action in ("rollback", "restore"):
        no_token = client.post(f"/api/v1/models/add_sub/{action}", json={"version": 1})
        assert (no_token.status_code, no_token.get_json()) == (403, NO_CSRF)
    assert (tmp_path / "add_sub" / "2").is_dir()
