"""A decoupled python model over tritonclient.grpc's stream against the real
daemon: every response streamed as the model sends it, Triton's
``triton_final_response`` parameter and empty final, and unary infer refused
with Triton's text."""

from __future__ import annotations

import base64
import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from model_fixtures import build_streaming_repository

CALLBACK_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def repository(repository):
    return build_streaming_repository(repository)


@pytest.fixture
def stream(daemon):
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        yield client, answers
        client.stop_stream()
    assert answers.empty()


def repeat_inputs(values: list[int]) -> list:
    item = grpcclient.InferInput("IN", [len(values)], "INT32")
    item.set_data_from_numpy(np.array(values, dtype=np.int32))
    return [item]


def take(answers: queue.Queue, count: int) -> list:
    taken = []
    for _ in range(count):
        result, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
        assert error is None, error
        taken.append(result.get_response(as_json=True))
    return taken


@pytest.mark.parametrize("mode", ["inline", "thread"])
def test_one_request_streams_a_response_per_element(stream, mode) -> None:
    client, answers = stream
    client.async_stream_infer(
        "repeat", repeat_inputs([10, 20, 30]), request_id="r1", parameters={"mode": mode}
    )
    responses = take(answers, 3)
    outs = [r["raw_output_contents"][0] for r in responses]
    assert [np.frombuffer(base64.b64decode(o), np.int32)[0] for o in outs] == [10, 20, 30]
    for response in responses:
        assert response["id"] == "r1"
        assert response["model_version"] == "1"
        assert response["parameters"] == {"triton_final_response": {"bool_param": False}}
    # The final came without a response and the client did not ask for it.
    client.async_stream_infer("repeat", repeat_inputs([1]), request_id="next")
    assert take(answers, 1)[0]["id"] == "next"


def test_empty_final_response_when_the_client_asks(stream) -> None:
    client, answers = stream
    client.async_stream_infer(
        "repeat", repeat_inputs([5, 6]), request_id="e", enable_empty_final_response=True
    )
    responses = take(answers, 3)
    finals = [r["parameters"]["triton_final_response"]["bool_param"] for r in responses]
    assert finals == [False, False, True]
    assert responses[-1] == {
        "model_name": "repeat",
        "id": "e",
        "parameters": {"triton_final_response": {"bool_param": True}},
    }


def test_zero_responses_send_nothing_unless_asked(stream) -> None:
    client, answers = stream
    client.async_stream_infer("repeat", repeat_inputs([]), request_id="none")
    client.async_stream_infer(
        "repeat", repeat_inputs([]), request_id="empty", enable_empty_final_response=True
    )
    (only,) = take(answers, 1)
    assert only["id"] == "empty"
    assert only["parameters"]["triton_final_response"]["bool_param"] is True


def test_model_errors_arrive_in_the_stream(stream) -> None:
    client, answers = stream
    client.async_stream_infer(
        "repeat", repeat_inputs([3]), request_id="x", parameters={"mode": "error"}
    )
    _, error = answers.get(timeout=CALLBACK_TIMEOUT_S)
    assert error.message() == "model 'repeat' version 1: first one failed"
    assert len(take(answers, 1)) == 1


def test_ordinary_model_still_answers_once_per_request(stream) -> None:
    client, answers = stream
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        item = grpcclient.InferInput(name, [1, 16], "FP32")
        item.set_data_from_numpy(np.ones((1, 16), np.float32))
        inputs.append(item)
    client.async_stream_infer("add_sub", inputs, request_id="plain")
    (response,) = take(answers, 1)
    assert response["id"] == "plain"
    assert "parameters" not in response


def test_unary_infer_is_refused_with_tritons_text(daemon) -> None:
    with (
        grpcclient.InferenceServerClient(daemon.grpc_url) as client,
        pytest.raises(InferenceServerException) as caught,
    ):
        client.infer("repeat", repeat_inputs([1]))
    assert caught.value.status() == "StatusCode.UNIMPLEMENTED"
    assert caught.value.message() == (
        "ModelInfer RPC doesn't support models with decoupled transaction policy"
    )
