"""Statistics count a model's error answers and its failures as Triton 2.51
does (python backend, measured on the reference server):

- a request the model answered with an error (``InferenceResponse(error=...)``,
  ``EdgeboxError.answered_by_model``) is a success: it counts in
  ``inference_count``, ``execution_count``, ``success``, ``queue`` and the
  compute phases, although its client gets the error;
- an ``execute`` that raised (the python runner then returns one unmarked error
  per request; other backends raise) counts one execution, no inferences, one
  ``fail`` per request and nothing in ``queue`` or the compute phases; the batch
  still counts in ``batch_stats`` under its size.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from google.protobuf import text_format

from daemon_process import wait_for
from edgebox.errors import EdgeboxError
from edgebox.repository.config import ModelConfig
from edgebox.repository.initial_state import initial_state_values
from edgebox.scheduling.decoupled import DecoupledScheduler
from edgebox.scheduling.direct import DirectScheduler
from edgebox.scheduling.dynamic_batcher import DynamicBatcher
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.sequence_batcher import SequenceBatcher
from edgebox.scheduling.sequence_controls import SequenceControls
from edgebox.scheduling.statistics import StatisticsSnapshot
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes.gated_instance import FakeGatedInstance

WHERE = "model 'm' version 1"
RAISE = -5.0


def config(max_batch: int, extra: str = "") -> ModelConfig:
    text = f"""
    name: "m"
    max_batch_size: {max_batch}
    input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    {extra}
    """
    return text_format.Parse(text, ModelConfig())


class FakeAnsweringInstance(FakeGatedInstance):
    """Like the python runner: X < 0 is answered with the model's error
    ("negative"); a batch holding X == -5 makes execute fail, every request
    getting the same unmarked error (``raising=True``: execute raises instead)."""

    def __init__(self, raising: bool = False, hold_first: bool = False) -> None:
        super().__init__(hold_first=hold_first)
        self.raising = raising

    def execute(self, requests):
        answers = super().execute(requests)
        firsts = [float(r.input("X").data.flat[0]) for r in requests]
        if RAISE in firsts:
            if self.raising:
                raise RuntimeError("raised")
            return [EdgeboxError(f"{WHERE}: execute() raised") for _ in requests]
        return [
            EdgeboxError(f"{WHERE}: negative", answered_by_model=True) if first < 0 else answer
            for first, answer in zip(firsts, answers, strict=True)
        ]


def counts(stats: StatisticsSnapshot) -> dict[str, int]:
    phases = stats.inference_stats
    return {
        "inference": stats.inference_count,
        "execution": stats.execution_count,
        "success": phases.success.count,
        "fail": phases.fail.count,
        "queue": phases.queue.count,
        "compute_input": phases.compute_input.count,
        "compute_infer": phases.compute_infer.count,
        "compute_output": phases.compute_output.count,
    }


def deltas(inference, execution, success, fail, queue, compute) -> dict[str, int]:
    return {
        "inference": inference,
        "execution": execution,
        "success": success,
        "fail": fail,
        "queue": queue,
        "compute_input": compute,
        "compute_infer": compute,
        "compute_output": compute,
    }


# -- direct ---------------------------------------------------------------


def direct(raising: bool = False) -> DirectScheduler:
    signature = ModelSignature.from_config(config(0))
    return DirectScheduler(InstancePool([FakeAnsweringInstance(raising)]), signature, WHERE)


def one(value: float) -> InferRequest:
    return InferRequest("m", [Tensor("X", "FP32", np.full(3, value, np.float32))], id=str(value))


def test_direct_counts_a_normal_answer_once_everywhere() -> None:
    scheduler = direct()
    scheduler.infer(one(1.0))
    assert counts(scheduler.statistics.snapshot()) == deltas(1, 1, 1, 0, 1, 1)


def test_direct_counts_the_models_error_answer_as_a_success() -> None:
    scheduler = direct()
    with pytest.raises(EdgeboxError, match=r"^model 'm' version 1: negative$"):
        scheduler.infer(one(-1.0))
    stats = scheduler.statistics.snapshot()
    assert counts(stats) == deltas(1, 1, 1, 0, 1, 1)
    assert [b.batch_size for b in stats.batch_stats] == [1]


@pytest.mark.parametrize("raising", [False, True], ids=["failed-results", "raised"])
def test_direct_counts_a_failed_execute_as_one_execution_and_a_failure(raising) -> None:
    scheduler = direct(raising)
    with pytest.raises(EdgeboxError, match=r"execute\(\) raised|backend failed"):
        scheduler.infer(one(RAISE))
    stats = scheduler.statistics.snapshot()
    assert counts(stats) == deltas(0, 1, 0, 1, 0, 0)
    assert [(b.batch_size, b.compute_infer.count) for b in stats.batch_stats] == [(1, 1)]


# -- dynamic batcher --------------------------------------------------------


class Caller(threading.Thread):
    def __init__(self, batcher: DynamicBatcher, value: float) -> None:
        super().__init__(daemon=True)
        self.batcher, self.value = batcher, value
        self.error: EdgeboxError | None = None
        self.start()

    def run(self) -> None:
        request = InferRequest(
            "m", [Tensor("X", "FP32", np.full((1, 3), self.value, np.float32))], id=str(self.value)
        )
        try:
            self.batcher.infer(request)
        except EdgeboxError as exc:
            self.error = exc


def batch_of_four(values: tuple[float, ...], raising: bool = False) -> tuple[DynamicBatcher, list]:
    """A held first request (X=0, a batch of one), then ``values`` queued
    behind it so they leave as one batch; the counts of that second batch."""
    instance = FakeAnsweringInstance(raising, hold_first=True)
    cfg = config(4, "dynamic_batching { }")
    batcher = DynamicBatcher(InstancePool([instance]), ModelSignature.from_config(cfg), cfg, WHERE)
    first = Caller(batcher, 0.0)
    assert instance.entered.wait(5)
    callers = [Caller(batcher, v) for v in values]
    wait_for(lambda: batcher.queue_size == len(values), what="requests to queue")
    before = counts(batcher.statistics.snapshot())
    instance.release.set()
    for caller in [first, *callers]:
        caller.join(10)
    assert [len(b) for b in instance.batches] == [1, len(values)]
    after = counts(batcher.statistics.snapshot())
    batcher.close()
    # The held first request is counted after the release too: take it away.
    first_only = deltas(1, 1, 1, 0, 1, 1)
    delta = {k: after[k] - before[k] - first_only[k] for k in after}
    return batcher, [delta, [c.error for c in callers]]


def test_dynamic_batch_with_an_error_answer_counts_every_request_as_a_success() -> None:
    _, (delta, errors) = batch_of_four((1.0, -1.0, 3.0, 4.0))
    assert delta == deltas(4, 1, 4, 0, 4, 4)
    assert [str(e) if e else None for e in errors] == [None, f"{WHERE}: negative", None, None]


@pytest.mark.parametrize("raising", [False, True], ids=["failed-results", "raised"])
def test_dynamic_batch_whose_execute_failed_counts_one_execution_and_each_failure(raising) -> None:
    batcher, (delta, errors) = batch_of_four((1.0, RAISE, 3.0, 4.0), raising)
    assert delta == deltas(0, 1, 0, 4, 0, 0)
    assert all(e is not None for e in errors)
    sizes = {b.batch_size: b.compute_infer.count for b in batcher.statistics.snapshot().batch_stats}
    assert sizes == {1: 1, 4: 1}


# -- decoupled --------------------------------------------------------------


class FakeDecoupledInstance:
    """Sends X's answer, or for X < 0 the model's error response, then the
    final flag; X == -5 makes execute raise."""

    def execute_decoupled(self, requests, sinks) -> None:
        for request, sink in zip(requests, sinks, strict=True):
            value = float(request.input("X").data[0])
            if value == RAISE:
                raise RuntimeError("raised")
            if value < 0:
                sink.send(EdgeboxError(f"{WHERE}: negative", answered_by_model=True), False)
            else:
                sink.send(
                    InferResponse("m", "1", [Tensor("Y", "FP32", request.input("X").data)]), False
                )
            sink.send(None, True)

    def close(self) -> None:
        pass


class RecordingSink:
    def __init__(self) -> None:
        self.sent: list = []

    def send(self, response, final: bool) -> None:
        self.sent.append((response, final))


def decoupled() -> DecoupledScheduler:
    cfg = config(0, "model_transaction_policy { decoupled: true }")
    return DecoupledScheduler(
        InstancePool([FakeDecoupledInstance()]), ModelSignature.from_config(cfg), WHERE
    )


def test_decoupled_error_response_then_final_counts_as_a_success() -> None:
    scheduler = decoupled()
    sink = RecordingSink()
    scheduler.submit(one(-1.0), sink)
    assert [(str(r) if r else None, f) for r, f in sink.sent] == [
        (f"{WHERE}: negative", False),
        (None, True),
    ]
    assert counts(scheduler.statistics.snapshot()) == deltas(1, 1, 1, 0, 1, 1)


def test_decoupled_execute_that_raised_counts_one_execution_and_a_failure() -> None:
    scheduler = decoupled()
    sink = RecordingSink()
    scheduler.submit(one(RAISE), sink)
    assert [(str(r), f) for r, f in sink.sent] == [
        (f"{WHERE}: backend failed: RuntimeError: raised", True)
    ]
    assert counts(scheduler.statistics.snapshot()) == deltas(0, 1, 0, 1, 0, 0)


# -- sequence batcher -------------------------------------------------------

SEQUENCE_CONFIG = """
name: "m"
max_batch_size: 0
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
}
"""


class FakeAnsweringSequenceInstance:
    """Echoes INPUT as OUTPUT; INPUT < 0 is the model's error answer, INPUT
    == -5 a failed execute (unmarked errors, as the python runner returns)."""

    def execute(self, requests):
        values = [int(r.input("INPUT").data[0]) for r in requests]
        if int(RAISE) in values:
            return [EdgeboxError(f"{WHERE}: execute() raised") for _ in requests]
        return [
            EdgeboxError(f"{WHERE}: negative", answered_by_model=True)
            if value < 0
            else InferResponse("m", "1", [Tensor("OUTPUT", "INT32", r.input("INPUT").data)])
            for value, r in zip(values, requests, strict=True)
        ]

    def close(self) -> None:
        pass


def test_sequence_batcher_counts_error_answers_as_successes_and_failed_executes_as_failures(
    tmp_path,
) -> None:
    cfg = text_format.Parse(SEQUENCE_CONFIG, ModelConfig())
    batcher = SequenceBatcher(
        InstancePool([FakeAnsweringSequenceInstance()]),
        ModelSignature.from_config(cfg),
        cfg,
        SequenceControls.from_config(cfg, initial_state_values(cfg, tmp_path, WHERE)),
        WHERE,
    )

    def step(value: int, start: bool = False, end: bool = False) -> dict[str, int]:
        before = counts(batcher.statistics.snapshot())
        request = InferRequest(
            "m",
            [Tensor("INPUT", "INT32", np.full(1, value, np.int32))],
            parameters={"sequence_id": 7, "sequence_start": start, "sequence_end": end},
        )
        try:
            batcher.infer(request)
        except EdgeboxError:
            pass
        after = counts(batcher.statistics.snapshot())
        return {k: after[k] - before[k] for k in after}

    try:
        assert step(1, start=True) == deltas(1, 1, 1, 0, 1, 1)
        assert step(-1) == deltas(1, 1, 1, 0, 1, 1)
        assert step(int(RAISE), end=True) == deltas(0, 1, 0, 1, 0, 0)
    finally:
        batcher.close()
