"""Triton's logging and trace extensions against a real daemon with the
official tritonclient (gRPC and HTTP): the answers Triton 2.51 gives, the
verbose level driving the daemon's log at run time, and the refusals edgebox
makes (a log file path, any trace level but OFF)."""

from __future__ import annotations

import pytest
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control, wait_for
from model_fixtures import add_add_sub
from triton_answers import LOG_DEFAULTS, TRACE_DEFAULTS

TRACE_DEFAULTS_GRPC = {
    key: value if isinstance(value, list) else [value] for key, value in TRACE_DEFAULTS.items()
}
"""Triton's gRPC answer: every trace setting is a list of strings."""

STRAY = "repository: ignoring stray file"


pytestmark = pytest.mark.daemon_flags(*explicit_control("*"))


@pytest.fixture(scope="module")
def repository(repository):
    add_add_sub(repository)
    (repository / "notes.txt").write_text("not a model\n")
    return repository


@pytest.fixture
def client(grpc_client):
    yield grpc_client
    grpc_client.update_log_settings({"log_verbose_level": 0, "log_info": True})


def log_settings(client) -> dict:
    answer = client.get_log_settings(as_json=True)["settings"]
    return {key: next(iter(value.values()), 0) for key, value in answer.items()}


def trace_settings(answer: dict) -> dict:
    return {key: value["value"] for key, value in answer["settings"].items()}


def test_get_log_settings_answers_tritons_settings(client):
    answer = client.get_log_settings(as_json=True)["settings"]
    assert answer["log_info"] == {"bool_param": True}
    assert answer["log_format"] == {"string_param": "default"}
    assert log_settings(client) == LOG_DEFAULTS


def test_verbose_level_turns_the_daemons_debug_log_on_and_off(client, daemon):
    client.get_model_repository_index()
    assert STRAY not in daemon.log()
    answer = client.update_log_settings({"log_verbose_level": 1}, as_json=True)["settings"]
    assert answer["log_verbose_level"] == {"uint32_param": 1}
    client.get_model_repository_index()
    wait_for(lambda: STRAY in daemon.log(), what="the debug line after log_verbose_level 1")
    client.update_log_settings({"log_verbose_level": 0})
    seen = daemon.log().count(STRAY)
    client.get_model_repository_index()
    client.get_server_metadata()
    assert daemon.log().count(STRAY) == seen


def test_log_file_cannot_be_set_over_grpc(client):
    with pytest.raises(InferenceServerException) as raised:
        client.update_log_settings({"log_file": "/tmp/edgebox.log"})
    assert raised.value.status() == "StatusCode.UNIMPLEMENTED"
    assert raised.value.message() == (
        "log settings: 'log_file' cannot be changed over the network "
        "(edgebox logs to stderr, the journal under systemd)"
    )
    assert log_settings(client) == LOG_DEFAULTS


def test_bad_log_format_is_invalid_argument(client):
    with pytest.raises(InferenceServerException) as raised:
        client.update_log_settings({"log_format": "bogus"})
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert raised.value.message() == "log settings: 'log_format' expected 'default', got 'bogus'"


def test_http_client_updates_what_grpc_reads(client, http_client):
    answer = http_client.update_log_settings({"log_info": False})
    assert answer == {**LOG_DEFAULTS, "log_info": False}
    assert log_settings(client)["log_info"] is False
    assert http_client.get_log_settings() == {**LOG_DEFAULTS, "log_info": False}


def test_trace_settings_answer_tritons_shape_with_tracing_off(client, http_client):
    assert trace_settings(client.get_trace_settings(as_json=True)) == TRACE_DEFAULTS_GRPC
    model = client.get_trace_settings(model_name="add_sub", as_json=True)
    assert trace_settings(model) == TRACE_DEFAULTS_GRPC
    off = client.update_trace_settings(settings={"trace_level": ["OFF"]}, as_json=True)
    assert trace_settings(off) == TRACE_DEFAULTS_GRPC
    assert http_client.get_trace_settings(model_name="add_sub") == TRACE_DEFAULTS


def test_a_trace_level_other_than_off_is_refused(client, http_client):
    with pytest.raises(InferenceServerException) as raised:
        client.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"]})
    assert raised.value.status() == "StatusCode.UNIMPLEMENTED"
    assert raised.value.message() == (
        "trace settings: tracing is not supported by edgebox; 'trace_level' accepts "
        "only ['OFF'], got ['TIMESTAMPS']"
    )
    with pytest.raises(InferenceServerException) as raised:
        http_client.update_trace_settings(
            model_name="add_sub", settings={"trace_level": ["TENSORS"]}
        )
    assert raised.value.status() == "400"
    assert trace_settings(client.get_trace_settings(as_json=True)) == TRACE_DEFAULTS_GRPC


def test_trace_settings_of_an_unknown_model_are_not_found(client):
    with pytest.raises(InferenceServerException) as raised:
        client.get_trace_settings(model_name="nope")
    assert raised.value.status() == "StatusCode.NOT_FOUND"
    assert raised.value.message() == "Request for unknown model: 'nope' is not found"


def test_server_metadata_lists_logging_and_trace(client):
    assert {"logging", "trace"} <= set(client.get_server_metadata().extensions)
