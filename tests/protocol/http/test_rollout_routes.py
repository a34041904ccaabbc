"""The rollout resource over HTTP (rollout_ext.py), in process: V2Handlers
over the real stack (tests/inprocess_stack.py), a python model whose version
2 is in shadow rollout against version 1. The rollout thread is not started,
so nothing but the requests here decides a rollout."""

from __future__ import annotations

import json
import logging

import pytest

from edgebox.protocol.access_policy import AccessPolicy, parse_restrictions
from edgebox.protocol.http.access import HttpAccessControl, api_of
from edgebox.protocol.http.messages import HttpRequest, HttpResponse
from edgebox.protocol.http.v2_handlers import V2Handlers
from model_fixtures import add_python_xy
from rollout_models import add_shadow_model, publish_version

LOOPBACK = "127.0.0.1"
REMOTE = "192.0.2.7"
IN_ROLLOUT = "rollout: shadow, waiting for live traffic, 0/100000 samples"
ABORTED = "rollout: aborted by the operator"


@pytest.fixture
def handlers(stack, tmp_path) -> V2Handlers:
    """``lane``: version 2 in shadow rollout; ``plain``: version 1, no rollout."""
    add_python_xy(tmp_path, "plain")
    model_dir = add_shadow_model(tmp_path, "lane")
    stack.repository_control.load_model("plain")
    stack.repository_control.load_model("lane")
    publish_version(model_dir, 2)
    stack.repository_control.load_model("lane")
    return V2Handlers(stack.dataplane, stack.repository_control)


def call(handler, method: str, path: str, body: bytes = b"", **options) -> HttpResponse:
    headers = options.get("headers", {})
    peer = options.get("peer", LOOPBACK)
    return handler(HttpRequest(method, path, "", headers, memoryview(bytearray(body)), peer=peer))


def json_of(response: HttpResponse):
    assert response.content_type == "application/json"
    return json.loads(b"".join(bytes(b) for b in response.body))


def index_entry(handler, model: str, version: str) -> dict:
    index = json_of(call(handler, "POST", "/v2/repository/index"))
    (entry,) = [e for e in index if e["name"] == model and e.get("version") == version]
    return entry


# -- reading ----------------------------------------------------------------


def test_rollout_of_a_model_in_shadow_names_both_versions_and_the_samples(handlers):
    response = call(handlers, "GET", "/v2/repository/models/lane/rollout")
    assert response.status == 200
    document = json_of(response)
    assert document["model"] == "lane"
    assert (document["stage"], document["policy"]) == ("shadow", "shadow")
    assert (document["version"], document["serving_version"]) == (2, 1)
    assert (document["samples"], document["samples_wanted"]) == (0, 100000)
    assert document["agreement"] is None
    assert document["held"] == []
    assert "last" not in document
    assert index_entry(handlers, "lane", "2")["reason"] == IN_ROLLOUT


def test_head_of_the_rollout_is_answered_like_get(handlers):
    assert call(handlers, "HEAD", "/v2/repository/models/lane/rollout").status == 200


def test_model_without_a_rollout_is_stage_none(handlers):
    document = json_of(call(handlers, "GET", "/v2/repository/models/plain/rollout"))
    assert document["model"] == "plain"
    assert document["stage"] == "none"
    assert document["held"] == []
    assert "version" not in document


def test_rollouts_lists_only_the_models_in_rollout(handlers):
    response = call(handlers, "GET", "/v2/repository/rollouts")
    assert response.status == 200
    listed = json_of(response)
    assert [(d["model"], d["stage"], d["version"]) for d in listed] == [("lane", "shadow", 2)]


# -- the operator's actions ----------------------------------------------------


def test_abort_holds_the_candidate_and_answers_the_resource_after_it(handlers):
    response = call(handlers, "POST", "/v2/repository/models/lane/rollout/abort")
    assert response.status == 200
    document = json_of(response)
    assert document["stage"] == "none"
    assert [(h["version"], h["kind"], h["reason"]) for h in document["held"]] == [
        (2, "rejected", ABORTED)
    ]
    assert (document["last"]["version"], document["last"]["result"]) == (2, "rejected")
    entry = index_entry(handlers, "lane", "2")
    assert (entry["state"], entry["reason"]) == ("UNAVAILABLE", ABORTED)
    assert json_of(call(handlers, "GET", "/v2/repository/rollouts")) == []


def test_release_lets_an_aborted_version_roll_out_again(handlers):
    call(handlers, "POST", "/v2/repository/models/lane/rollout/abort")
    response = call(handlers, "POST", "/v2/repository/models/lane/rollout/release", b"{}")
    assert response.status == 200
    document = json_of(response)
    assert document["held"] == []
    assert (document["stage"], document["version"]) == ("shadow", 2)
    entry = index_entry(handlers, "lane", "2")
    assert (entry["state"], entry["reason"]) == ("LOADING", IN_ROLLOUT)


def test_promote_serves_the_candidate_and_watches_it(handlers):
    response = call(handlers, "POST", "/v2/repository/models/lane/rollout/promote")
    assert response.status == 200
    document = json_of(response)
    assert (document["stage"], document["version"]) == ("watching", 2)
    assert document["watch"]["requests"] == 0
    assert document["last"]["result"] == "promoted"
    assert index_entry(handlers, "lane", "2")["state"] == "READY"
    metadata = json_of(call(handlers, "GET", "/v2/models/lane"))
    assert metadata["versions"] == ["1", "2"]


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (
            "/v2/repository/models/plain/rollout/promote",
            400,
            "model 'plain': no rollout in progress",
        ),
        ("/v2/repository/models/plain/rollout/abort", 400, "model 'plain': no rollout in progress"),
        ("/v2/repository/models/plain/rollout/release", 404, "model 'plain': no version is held"),
        (
            "/v2/repository/models/nope/rollout/promote",
            404,
            "unknown model 'nope': no such model folder",
        ),
        (
            "/v2/repository/models/../rollout/abort",
            400,
            "model name '..': expected a single folder name (not '.' or '..', without '/' or NUL)",
        ),
    ],
)
def test_refused_actions_answer_the_error_map_status_and_message(handlers, path, status, message):
    response = call(handlers, "POST", path)
    assert (response.status, json_of(response)) == (status, {"error": message})


def test_rollout_of_an_unknown_model_is_404(handlers):
    response = call(handlers, "GET", "/v2/repository/models/nope/rollout")
    assert response.status == 404
    assert json_of(response) == {"error": "unknown model 'nope': no such model folder"}


def test_an_action_body_that_is_not_a_json_object_is_400_and_changes_nothing(handlers):
    response = call(handlers, "POST", "/v2/repository/models/lane/rollout/abort", b"[]")
    assert response.status == 400
    assert json_of(response) == {"error": "rollout abort 'lane': request JSON must be an object"}
    assert index_entry(handlers, "lane", "2")["state"] == "LOADING"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v2/repository/models/lane/rollout/promote"),
        ("GET", "/v2/repository/models/lane/rollout/abort"),
        ("PUT", "/v2/repository/models/lane/rollout/release"),
        ("POST", "/v2/repository/models/lane/rollout"),
        ("DELETE", "/v2/repository/models/lane/rollout"),
        ("POST", "/v2/repository/rollouts"),
    ],
)
def test_wrong_method_on_a_rollout_route_is_405(handlers, method, path):
    response = call(handlers, method, path)
    assert (response.status, json_of(response)) == (
        405,
        {"error": f"method {method} not allowed for {path}"},
    )
    assert index_entry(handlers, "lane", "2")["state"] == "LOADING"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/repository/models/lane/rollout/bogus"),
        ("POST", "/v2/repository/models/lane/rollout/abort/now"),
        ("GET", "/v2/repository/rollout"),
        ("GET", "/v2/repository/rollouts/lane"),
    ],
)
def test_unknown_rollout_path_is_404(handlers, method, path):
    response = call(handlers, method, path)
    assert (response.status, json_of(response)) == (
        404,
        {"error": f"no endpoint {method} {path}"},
    )


# -- audit -----------------------------------------------------------------------


def test_actions_are_audited_like_load_and_unload(handlers, caplog):
    caplog.set_level(logging.INFO, logger="edgebox.protocol.audit")
    call(handlers, "GET", "/v2/repository/models/lane/rollout")
    call(handlers, "POST", "/v2/repository/models/lane/rollout/abort")
    call(handlers, "POST", "/v2/repository/models/plain/rollout/promote")
    lines = [r.getMessage() for r in caplog.records if r.name == "edgebox.protocol.audit"]
    assert lines == [
        "Repository: rollout abort api=http from=127.0.0.1 model=lane result=ok",
        "Repository: rollout promote api=http from=127.0.0.1 model=plain result=failed "
        "error=\"model 'plain': no rollout in progress\"",
    ]


# -- access ----------------------------------------------------------------------

ROLLOUT_PATHS = [
    ("GET", "/v2/repository/rollouts"),
    ("GET", "/v2/repository/models/lane/rollout"),
    ("POST", "/v2/repository/models/lane/rollout/promote"),
    ("POST", "/v2/repository/models/lane/rollout/abort"),
    ("POST", "/v2/repository/models/lane/rollout/release"),
]


@pytest.mark.parametrize(("method", "path"), ROLLOUT_PATHS)
def test_rollout_routes_belong_to_the_model_repository_api(method, path):
    assert api_of(path) == "model-repository"


@pytest.mark.parametrize(("method", "path"), ROLLOUT_PATHS)
def test_other_machines_are_refused_the_rollout_routes_by_default(handlers, method, path):
    guarded = HttpAccessControl(handlers, AccessPolicy({}))
    response = call(guarded, method, path, peer=REMOTE)
    assert response.status == 403
    assert json_of(response)["error"].startswith(
        "API 'model-repository' is only served to clients on this machine (loopback)"
    )
    assert index_entry(handlers, "lane", "2")["state"] == "LOADING"


def test_the_api_key_opens_the_rollout_routes_to_other_machines(handlers):
    key = "k" * 32
    guarded = HttpAccessControl(handlers, AccessPolicy({}, api_key=key))
    path = "/v2/repository/models/lane/rollout/abort"
    refused = call(guarded, "POST", path, headers={"edgebox-api-key": "nope"}, peer=REMOTE)
    assert refused.status == 403
    assert index_entry(handlers, "lane", "2")["state"] == "LOADING"
    allowed = call(guarded, "POST", path, headers={"edgebox-api-key": key}, peer=REMOTE)
    assert allowed.status == 200
    assert index_entry(handlers, "lane", "2")["state"] == "UNAVAILABLE"


def test_a_restricted_model_repository_api_needs_its_header_for_rollouts_too(handlers):
    policy = AccessPolicy(parse_restrictions(["model-repository:admin-key=secret"]))
    guarded = HttpAccessControl(handlers, policy)
    path = "/v2/repository/models/lane/rollout"
    refused = call(guarded, "GET", path)
    assert (refused.status, json_of(refused)) == (
        403,
        {"error": "This API is restricted, expecting header 'admin-key'"},
    )
    assert call(guarded, "GET", path, headers={"admin-key": "secret"}).status == 200
