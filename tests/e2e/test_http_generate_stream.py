"""Triton's generate extension against the real daemon: ``generate_stream``
sends a decoupled model's responses as server-sent events as they come,
``generate`` answers one JSON object, and unary infer on a decoupled model
answers Triton's 501 text."""

from __future__ import annotations

import http.client
import json

import pytest

from model_fixtures import build_streaming_repository


@pytest.fixture(scope="module")
def repository(repository):
    return build_streaming_repository(repository)


@pytest.fixture
def connection(daemon):
    host, port = daemon.url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host.split("//")[-1], int(port), timeout=30)
    yield connection
    connection.close()


def post(connection, path: str, document) -> http.client.HTTPResponse:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    return connection.getresponse()


def events(response: http.client.HTTPResponse) -> list[dict]:
    """Parse a server-sent event stream: ``data: <json>`` lines, a blank line after each."""
    text = response.read().decode()
    assert text == "" or text.endswith("\n\n"), text
    parsed = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        parsed.append(json.loads(block.removeprefix("data: ")))
    return parsed


@pytest.mark.parametrize("mode", ["inline", "thread"])
def test_generate_stream_sends_one_event_per_response(connection, mode) -> None:
    response = post(
        connection, "/v2/models/repeat/generate_stream", {"IN": [7, 8, 9], "mode": mode}
    )
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert events(response) == [
        {"OUT": value, "IDX": index, "model_name": "repeat", "model_version": "1"}
        for index, value in enumerate([7, 8, 9])
    ]
    # The connection stays open for the next request.
    again = post(connection, "/v2/models/repeat/versions/1/generate_stream", {"IN": 4})
    assert [e["OUT"] for e in events(again)] == [4]


def test_generate_stream_of_zero_responses_is_empty(connection) -> None:
    response = post(connection, "/v2/models/repeat/generate_stream", {"IN": []})
    assert response.status == 200
    assert events(response) == []


def test_model_error_is_an_error_event(connection) -> None:
    response = post(connection, "/v2/models/repeat/generate_stream", {"IN": [5], "mode": "error"})
    assert events(response) == [
        {"error": "model 'repeat' version 1: first one failed"},
        {"OUT": 5, "IDX": 0, "model_name": "repeat", "model_version": "1"},
    ]


def test_generate_answers_exactly_one_response(connection) -> None:
    response = post(connection, "/v2/models/repeat/generate", {"IN": [3]})
    assert response.status == 200
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(response.read()) == {
        "OUT": 3,
        "IDX": 0,
        "model_name": "repeat",
        "model_version": "1",
    }
    response = post(connection, "/v2/models/repeat/generate", {"IN": [1, 2]})
    assert response.status == 400
    assert json.loads(response.read()) == {
        "error": "generate expects model to produce exactly 1 response, use generate stream "
        "for model that generates various number of responses"
    }


def test_generate_on_an_ordinary_batching_model(connection) -> None:
    response = post(
        connection, "/v2/models/add_sub/generate", {"INPUT0": [1.0] * 16, "INPUT1": [2.0] * 16}
    )
    assert response.status == 200
    answer = json.loads(response.read())
    assert answer["OUTPUT0"] == [3.0] * 16
    assert answer["OUTPUT1"] == [-1.0] * 16


def test_requests_refused_before_the_model_runs(connection) -> None:
    response = post(connection, "/v2/models/nope/generate_stream", {"IN": [1]})
    assert response.status == 404
    assert json.loads(response.read()) == {
        "error": "Request for unknown model: 'nope' is not found"
    }
    response = post(connection, "/v2/models/repeat/generate_stream", {"IN": [1], "x": 1.5})
    assert response.status == 400
    assert json.loads(response.read()) == {
        "error": "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."
    }
    response = post(connection, "/v2/models/repeat/generate", b"[1]")
    assert response.status == 400
    assert json.loads(response.read()) == {
        "error": "generate for model 'repeat': request JSON must be an object"
    }
    connection.request("GET", "/v2/models/repeat/generate")
    assert connection.getresponse().status == 405


def test_unary_infer_on_a_decoupled_model_is_tritons_501(connection) -> None:
    body = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [1]}]}
    response = post(connection, "/v2/models/repeat/infer", body)
    assert response.status == 501
    assert json.loads(response.read()) == {
        "error": "HTTP end point doesn't support models with decoupled transaction policy"
    }


@pytest.mark.parametrize("route", ["generate", "generate_stream"])
def test_deeply_nested_generate_body_is_a_400(connection, route) -> None:
    body = b'{"INPUT0": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = post(connection, f"/v2/models/add_sub/{route}", body)
    assert response.status == 400
    assert json.loads(response.read()) == {
        "error": "generate for model 'add_sub': request JSON nests too deeply"
    }
