from __future__ import annotations

import threading

import numpy as np
import pytest
from google.protobuf import text_format

from edgebox.errors import EdgeboxError, ErrorCode, Unavailable
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.ensemble_scheduler import EnsembleScheduler
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse, Tensor

DIAMOND = """
name: "diamond"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling { step [
  { model_name: "left"  input_map { key: "X" value: "IN" } output_map { key: "Y" value: "l" } },
  { model_name: "right" input_map { key: "X" value: "IN" } output_map { key: "Y" value: "r" } },
  { model_name: "join"  input_map { key: "A" value: "l" } input_map { key: "B" value: "r" }
                        output_map { key: "S" value: "OUT" } }
] }
"""


def scheduler_for(text: str, infer) -> EnsembleScheduler:
    config = text_format.Parse(text, ModelConfig())
    return EnsembleScheduler(
        config, ModelSignature.from_config(config), infer, "model 'diamond' version 1"
    )


class FakeBranchModels:
    """Stands in for the dataplane: 'left' and 'right' meet at a barrier, so the
    ensemble only completes if it runs them at the same time."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=5)
        self.threads: dict[str, str] = {}

    def __call__(self, request: InferRequest) -> InferResponse:
        self.threads[request.model_name] = threading.current_thread().name
        if request.model_name in ("left", "right"):
            self.barrier.wait()
            x = request.input("X").data
            y = x + 1 if request.model_name == "left" else x * 10
            return InferResponse(request.model_name, "1", [Tensor("Y", "FP32", y)])
        total = request.input("A").data + request.input("B").data
        return InferResponse("join", "1", [Tensor("S", "FP32", total)])


def request_in(data) -> InferRequest:
    return InferRequest("diamond", [Tensor("IN", "FP32", np.asarray(data, dtype=np.float32))])


def test_independent_branches_run_concurrently():
    models = FakeBranchModels()
    response = scheduler_for(DIAMOND, models).infer(request_in([1, 2]))
    np.testing.assert_array_equal(response.outputs[0].data, [12, 23])
    assert models.threads["left"] != models.threads["right"]


def test_intermediate_tensors_are_passed_by_reference():
    seen = []

    def infer(request):
        seen.append(request.inputs[0].data)
        if request.model_name == "join":
            return InferResponse("join", "1", [Tensor("S", "FP32", request.input("A").data)])
        return InferResponse(
            request.model_name, "1", [Tensor("Y", "FP32", request.input("X").data)]
        )

    incoming = request_in([3, 4])
    scheduler_for(DIAMOND, infer).infer(incoming)
    assert all(np.shares_memory(array, incoming.inputs[0].data) for array in seen)


def test_step_failure_names_the_step_and_keeps_its_code():
    def infer(request):
        if request.model_name == "right":
            raise Unavailable("model 'right' has no ready version")
        return InferResponse(
            request.model_name, "1", [Tensor("Y", "FP32", request.input("X").data)]
        )

    with pytest.raises(EdgeboxError) as error:
        scheduler_for(DIAMOND, infer).infer(request_in([1, 1]))
    assert error.value.code is ErrorCode.UNAVAILABLE
    assert (
        str(error.value)
        == "model 'diamond' version 1, step 'right': model 'right' has no ready version"
    )


def test_statistics_count_success_and_failure():
    scheduler = scheduler_for(DIAMOND, FakeBranchModels())
    scheduler.infer(request_in([0, 0]))
    stats = scheduler.statistics.snapshot().inference_stats
    assert (stats.success.count, stats.fail.count) == (1, 0)


SELF_CALLING = """
name: "loop"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling { step [
  { model_name: "loop" input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } }
] }
"""


def test_an_ensemble_that_reaches_itself_stops_at_the_nesting_limit():
    calls: list[int] = []

    def infer(request: InferRequest) -> InferResponse:
        calls.append(1)
        return scheduler.infer(request)

    scheduler = scheduler_for(SELF_CALLING, infer)
    with pytest.raises(EdgeboxError) as info:
        scheduler.infer(request_in([1.0, 2.0]))
    assert info.value.code is ErrorCode.UNAVAILABLE
    assert str(info.value).endswith(
        "ensembles nested more than 16 deep (does a step call the ensemble itself?)"
    )
    assert len(calls) == 16


FORKED_LOOP = """
name: "loop"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling { step [
  { model_name: "leaf" input_map { key: "X" value: "IN" } output_map { key: "Y" value: "side" } },
  { model_name: "loop" input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } }
] }
"""


def test_the_nesting_limit_follows_branches_onto_the_pool():
    """The first level's leaf waits until its sibling branch has started, so
    that branch (and the nesting below it) runs on a pool thread."""
    loop_calls: list[str] = []
    sibling_started = threading.Event()

    def infer(request: InferRequest) -> InferResponse:
        if request.model_name == "leaf":
            assert sibling_started.wait(5), "the sibling branch never started"
            return InferResponse("leaf", "1", [Tensor("Y", "FP32", request.input("X").data)])
        loop_calls.append(threading.current_thread().name)
        sibling_started.set()
        return scheduler.infer(request)

    scheduler = scheduler_for(FORKED_LOOP, infer)
    with pytest.raises(EdgeboxError, match="ensembles nested more than 16 deep"):
        scheduler.infer(request_in([1.0, 2.0]))
    assert loop_calls[0].startswith("ensemble-branch")
    assert len(loop_calls) == 16


def test_a_tensor_several_steps_read_reaches_each_of_them_read_only_and_uncopied():
    """'IN' feeds both branches: a step that wrote into it would change what
    its sibling reads, so each gets a read-only view (a python model writes
    into its own copy). 'l' and 'r' have one reader each and stay writable."""
    seen: dict[str, dict[str, np.ndarray]] = {}

    def infer(request):
        seen[request.model_name] = {t.name: t.data for t in request.inputs}
        if request.model_name == "join":
            total = request.input("A").data + request.input("B").data
            return InferResponse("join", "1", [Tensor("S", "FP32", total)])
        return InferResponse(
            request.model_name, "1", [Tensor("Y", "FP32", request.input("X").data * 2)]
        )

    incoming = request_in([3, 4])
    scheduler_for(DIAMOND, infer).infer(incoming)
    for branch in ("left", "right"):
        assert seen[branch]["X"].flags.writeable is False
        assert np.shares_memory(seen[branch]["X"], incoming.inputs[0].data)
    assert seen["join"]["A"].flags.writeable and seen["join"]["B"].flags.writeable
    assert incoming.inputs[0].data.flags.writeable


CHAIN = """
name: "chain"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling { step [
  { model_name: "first" input_map { key: "X" value: "IN" } output_map { key: "Y" value: "mid" } },
  { model_name: "second" input_map { key: "X" value: "mid" } output_map { key: "Y" value: "OUT" } }
] }
"""


def test_steps_inherit_the_requests_cancellation_and_none_starts_after_it():
    gone = threading.Event()
    called: list[str] = []

    def infer(request):
        called.append(request.model_name)
        assert request.cancelled() is False
        gone.set()
        assert request.cancelled() is True
        return InferResponse(
            request.model_name, "1", [Tensor("Y", "FP32", request.input("X").data)]
        )

    scheduler = scheduler_for(CHAIN, infer)
    cancelled = request_in([1, 2])
    cancelled.is_cancelled = gone.is_set
    with pytest.raises(EdgeboxError) as info:
        scheduler.infer(cancelled)
    assert info.value.code is ErrorCode.CANCELLED
    assert str(info.value) == (
        "model 'diamond' version 1: request cancelled before step 'second': "
        "its client gave up; the remaining steps were not run"
    )
    assert called == ["first"]
    assert scheduler.statistics.snapshot().inference_stats.fail.count == 1
