"""The logging and trace extensions over V2Handlers in process: Triton 2.51's
shapes (pinned from a reference tritonserver), partial updates, and 400s
with edgebox's text for what it refuses."""

from __future__ import annotations

import json
import logging

import pytest
from test_v2_routes import Server, build_repository, error_of, json_of

from triton_answers import LOG_DEFAULTS, TRACE_DEFAULTS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = Server(build_repository(tmp_path_factory.mktemp("logging-routes"))).start()
    yield started
    started.stop()


@pytest.fixture
def restored_logging(server):
    logger = logging.getLogger("edgebox")
    level = logger.level
    filters = {handler: list(handler.filters) for handler in logging.getLogger().handlers}
    yield
    server.call("POST", "/v2/logging", json.dumps(LOG_DEFAULTS | {"log_file": None}).encode())
    logger.setLevel(level)
    for handler, saved in filters.items():
        handler.filters[:] = saved


def post(server, path: str, document) -> object:
    return server.call("POST", path, json.dumps(document).encode())


def test_get_logging_answers_tritons_keys(server):
    response = server.call("GET", "/v2/logging")
    assert response.status == 200
    assert json_of(response) == LOG_DEFAULTS
    assert list(json_of(response)) == list(LOG_DEFAULTS)


def test_partial_post_changes_only_its_keys_and_turns_debug_on(server, restored_logging):
    response = post(server, "/v2/logging", {"log_verbose_level": 1})
    assert response.status == 200
    assert json_of(response) == {**LOG_DEFAULTS, "log_verbose_level": 1}
    assert logging.getLogger("edgebox.dataplane").isEnabledFor(logging.DEBUG)
    assert json_of(server.call("GET", "/v2/logging"))["log_verbose_level"] == 1
    assert json_of(server.call("POST", "/v2/logging"))["log_verbose_level"] == 1
    assert json_of(post(server, "/v2/logging", {"log_verbose_level": 0}))["log_verbose_level"] == 0
    assert not logging.getLogger("edgebox.dataplane").isEnabledFor(logging.DEBUG)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"log_file": "/tmp/edgebox.log"},
            "log settings: 'log_file' cannot be changed over the network "
            "(edgebox logs to stderr, the journal under systemd)",
        ),
        ({"log_info": "yes"}, "log settings: 'log_info' expected true or false, got 'yes'"),
        (
            {"log_verbose_level": "x"},
            "log settings: 'log_verbose_level' expected an integer >= 0, got 'x'",
        ),
        ({"log_format": "bogus"}, "log settings: 'log_format' expected 'default', got 'bogus'"),
        ([1], "log settings: request JSON must be an object"),
    ],
)
def test_bad_log_setting_is_400_and_changes_nothing(server, body, message):
    response = post(server, "/v2/logging", body)
    assert response.status == 400
    assert error_of(response) == message
    assert json_of(server.call("GET", "/v2/logging")) == LOG_DEFAULTS


@pytest.mark.parametrize("path", ["/v2/trace/setting", "/v2/models/add_sub/trace/setting"])
def test_get_trace_setting_answers_tritons_shape_with_tracing_off(server, path):
    response = server.call("GET", path)
    assert response.status == 200
    assert json_of(response) == TRACE_DEFAULTS


def test_trace_off_is_accepted_and_numbers_are_read_back(server):
    try:
        response = post(server, "/v2/trace/setting", {"trace_level": ["OFF"], "trace_rate": "5"})
        assert response.status == 200
        assert json_of(response) == {**TRACE_DEFAULTS, "trace_rate": "5"}
        model = post(server, "/v2/models/add_sub/trace/setting", {"trace_count": "3"})
        assert json_of(model) == {**TRACE_DEFAULTS, "trace_rate": "5", "trace_count": "3"}
    finally:
        post(server, "/v2/models/add_sub/trace/setting", {"trace_count": None})
        post(server, "/v2/trace/setting", {"trace_rate": None})
    assert json_of(server.call("GET", "/v2/models/add_sub/trace/setting")) == TRACE_DEFAULTS


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/v2/trace/setting",
            {"trace_level": ["TIMESTAMPS"]},
            "trace settings: tracing is not supported by edgebox; 'trace_level' accepts "
            "only ['OFF'], got ['TIMESTAMPS']",
        ),
        (
            "/v2/models/add_sub/trace/setting",
            {"trace_level": ["TENSORS"]},
            "model 'add_sub' trace settings: tracing is not supported by edgebox; "
            "'trace_level' accepts only ['OFF'], got ['TENSORS']",
        ),
        (
            "/v2/trace/setting",
            {"trace_file": "/tmp/t.json"},
            "trace settings: 'trace_file' cannot be changed over the network",
        ),
        (
            "/v2/trace/setting",
            {"trace_rate": "x"},
            "trace settings: 'trace_rate' expected an integer >= 0 as a string, got 'x'",
        ),
    ],
)
def test_trace_setting_other_than_off_is_400(server, path, body, message):
    response = post(server, path, body)
    assert response.status == 400
    assert error_of(response) == message


def test_trace_setting_of_an_unknown_model_is_404(server):
    for method in ("GET", "POST"):
        response = server.call(method, "/v2/models/nope/trace/setting")
        assert response.status == 404
        assert error_of(response) == "Request for unknown model: 'nope' is not found"


@pytest.mark.parametrize(
    "path", ["/v2/logging", "/v2/trace/setting", "/v2/models/add_sub/trace/setting"]
)
def test_other_methods_on_settings_are_405(server, path):
    response = server.call("DELETE", path)
    assert response.status == 405
    assert error_of(response) == f"method DELETE not allowed for {path}"
