"""The response-sink contract's unary case: ``UnaryResponse`` takes exactly
one final response and hands it to the one waiting thread, whichever comes
first; misuse by a producer raises at the producer."""

from __future__ import annotations

import threading

import pytest

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument
from edgebox.responses import ResponseContractError, UnaryResponse
from edgebox.tensors import InferResponse

WHERE = "model 'm' version 1"


def response(tag: str = "r") -> InferResponse:
    return InferResponse("m", "1", [], id=tag)


def test_a_response_sent_before_result_is_returned_at_once():
    sink = UnaryResponse(WHERE)
    answer = response()
    sink.send(answer, True)
    assert sink.done
    assert sink.result() is answer


def test_result_waits_for_a_final_sent_from_another_thread():
    sink = UnaryResponse(WHERE)
    answer = response()
    started = threading.Event()

    def send_later() -> None:
        started.wait(5)
        sink.send(answer, True)

    sender = threading.Thread(target=send_later)
    sender.start()
    started.set()
    assert sink.result() is answer
    sender.join(5)


def test_the_waiter_and_the_sender_never_miss_each_other():
    """Both orders, and the race between them, many times over: every result returns."""
    for index in range(300):
        sink = UnaryResponse(WHERE)
        answer = response(str(index))
        sender = threading.Thread(target=sink.send, args=(answer, True))
        sender.start()
        assert sink.result() is answer
        sender.join(5)


def test_an_error_sent_as_the_final_is_raised_by_result():
    sink = UnaryResponse(WHERE)
    sink.send(InvalidArgument(f"{WHERE}: bad input"), True)
    with pytest.raises(InvalidArgument, match="bad input"):
        sink.result()


def test_a_second_final_raises_at_the_producer_and_the_first_stands():
    sink = UnaryResponse(WHERE)
    first = response("first")
    sink.send(first, True)
    with pytest.raises(ResponseContractError) as misuse:
        sink.send(response("second"), True)
    assert str(misuse.value) == f"{WHERE}: a response was sent after the final one"
    assert misuse.value.code is ErrorCode.INTERNAL
    assert sink.result() is first


def test_a_non_final_response_to_a_unary_request_raises_at_the_producer():
    sink = UnaryResponse(WHERE)
    with pytest.raises(ResponseContractError) as misuse:
        sink.send(response(), False)
    assert str(misuse.value) == (
        f"{WHERE}: a unary request got a non-final response; only decoupled models send those"
    )
    assert not sink.done


def test_a_final_without_a_response_fails_the_unary_request():
    sink = UnaryResponse(WHERE)
    sink.send(None, True)
    with pytest.raises(EdgeboxError) as failed:
        sink.result()
    assert str(failed.value) == f"{WHERE}: the request completed without a response"
    assert failed.value.code is ErrorCode.INTERNAL
