"""A python model's own error answer stays marked ``answered_by_model`` on
its way out of the runner (decoupled sends included) and across the isolated
channel, so statistics count the request as Triton 2.51 does: a success."""

from __future__ import annotations

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends.python.isolated_messages import error_from_header, error_header
from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.tensors import InferRequest, Tensor
from fakes.response_sink import FakeStreamSink
from model_fixtures import add_decoupled_repeat


def stream(stack, mode: str) -> FakeStreamSink:
    sink = FakeStreamSink()
    request = InferRequest(
        "repeat", [Tensor("IN", "INT32", np.array([3], np.int32))], parameters={"mode": mode}
    )
    stack.dataplane.infer_stream(request, sink)
    wait_for(sink.final.is_set, timeout_s=10, what="the final send")
    return sink


def counts(stack) -> tuple[int, ...]:
    stats = stack.dataplane.statistics("repeat")[0].counts
    phases = stats.inference_stats
    return (
        stats.inference_count,
        stats.execution_count,
        phases.success.count,
        phases.fail.count,
        phases.queue.count,
    )


def test_decoupled_error_response_is_marked_and_counts_as_a_success(stack, tmp_path) -> None:
    add_decoupled_repeat(tmp_path)
    stack.manager.load_model("repeat")
    sink = stream(stack, "error")
    error = sink.sends[0][0]
    assert str(error) == "model 'repeat' version 1: first one failed"
    assert error.answered_by_model
    assert counts(stack) == (1, 1, 1, 0, 1)


def test_decoupled_execute_that_raised_counts_one_execution_and_a_failure(stack, tmp_path) -> None:
    add_decoupled_repeat(tmp_path)
    stack.manager.load_model("repeat")
    ((error, final),) = stream(stack, "raise").sends
    assert final and not error.answered_by_model
    assert counts(stack) == (0, 1, 0, 1, 0)


@pytest.mark.parametrize(
    "error",
    [
        EdgeboxError("model 'm' version 1: negative", answered_by_model=True),
        InvalidArgument("model 'm' version 1: bad", answered_by_model=True),
        EdgeboxError("model 'm' version 1: execute() raised"),
    ],
)
def test_the_mark_survives_the_isolated_channel(error) -> None:
    back = error_from_header(error_header(error))
    assert (type(back), str(back), back.code, back.answered_by_model) == (
        type(error),
        str(error),
        error.code,
        error.answered_by_model,
    )
