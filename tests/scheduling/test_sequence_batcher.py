from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from google.protobuf import text_format

from daemon_process import wait_for
from edgebox.errors import Cancelled, ErrorCode, InvalidArgument, Unavailable
from edgebox.repository.config import ModelConfig
from edgebox.repository.initial_state import initial_state_values
from edgebox.scheduling.instance_pool import InstancePool
from edgebox.scheduling.sequence_batcher import SequenceBatcher
from edgebox.scheduling.sequence_controls import SequenceControls
from edgebox.scheduling.sequence_tag import WARMUP_SEQUENCE
from edgebox.signature import ModelSignature
from edgebox.tensors import InferRequest, RequestedOutput, Tensor
from fakes.caller import Caller
from fakes.sequence_instance import FakeSequenceInstance

CONTROLS = """
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: %s } ] }
  ]
"""
STATE = """
  state [ { input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32
            dims: [ 1 ] } ]
"""
CONFIG = """
name: "m"
max_batch_size: %(max_batch)d
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "ACC" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  %(strategy)s
  %(idle)s
  %(controls)s
  %(state)s
}
"""


def batcher_for(
    instances,
    tmp_path,
    max_batch: int = 0,
    strategy: str = "",
    idle_us: int = 0,
    corrid: str = "TYPE_UINT64",
    state: bool = False,
) -> SequenceBatcher:
    text = CONFIG % {
        "max_batch": max_batch,
        "strategy": strategy,
        "idle": f"max_sequence_idle_microseconds: {idle_us}" if idle_us else "",
        "controls": CONTROLS % corrid,
        "state": STATE if state else "",
    }
    config = text_format.Parse(text, ModelConfig())
    where = "model 'm' version 1"
    controls = SequenceControls.from_config(config, initial_state_values(config, tmp_path, where))
    return SequenceBatcher(
        InstancePool(instances), ModelSignature.from_config(config), config, controls, where
    )


def request(value: int, batched: bool = False, rows: int = 1, outputs=(), **parameters):
    shape = (rows, 1) if batched else (1,)
    data = np.full(shape, value, dtype=np.int32)
    return InferRequest(
        "m",
        [Tensor("INPUT", "INT32", data)],
        id=str(value),
        outputs=[RequestedOutput(n) for n in outputs],
        parameters=parameters,
    )


def seq(sequence_id, value, start=False, end=False, **kwargs):
    return request(value, sequence_id=sequence_id, sequence_start=start, sequence_end=end, **kwargs)


def output(response, name: str = "OUTPUT") -> int:
    return int(response.output(name).data.ravel()[0])


def refusal(batcher, req) -> str:
    with pytest.raises(InvalidArgument) as caught:
        batcher.infer(req)
    assert caught.value.code == ErrorCode.INVALID_ARG
    return str(caught.value)


def test_requests_outside_a_started_sequence_are_refused_in_tritons_words(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path)
    assert refusal(batcher, request(1)) == (
        "inference request to model 'm' must specify a non-zero or non-empty correlation ID"
    )
    assert refusal(batcher, seq("", 1, start=True)).endswith("non-empty correlation ID")
    no_start = (
        "inference request for sequence 5 to model 'm' must specify the START flag on the "
        "first request of the sequence"
    )
    assert refusal(batcher, seq(5, 1)) == no_start
    batcher.infer(seq(5, 1, start=True))
    batcher.infer(seq(5, 2, end=True))
    assert refusal(batcher, seq(5, 3)) == no_start
    stats = batcher.statistics.snapshot()
    assert (stats.inference_stats.success.count, stats.inference_stats.fail.count) == (2, 0)
    batcher.close()


def test_a_batched_request_of_more_than_one_item_is_refused(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path, max_batch=4)
    text = refusal(batcher, seq(7, 1, start=True, batched=True, rows=2))
    assert text == (
        "inference request to model 'm' must specify batch-size 1 due to requirements of "
        "sequence batcher"
    )
    assert batcher.infer(seq(7, 1, start=True, batched=True)).output("OUTPUT").data.shape == (1, 1)
    batcher.close()


def test_bad_parameter_types_are_client_errors(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path)
    assert "unsigned 64-bit integer, got -3" in refusal(batcher, seq(-3, 1, start=True))
    assert "must be an unsigned integer or a string, got bool" in refusal(
        batcher, seq(True, 1, start=True)
    )
    assert "'sequence_start' must be a boolean, got int" in refusal(batcher, seq(4, 1, start=1))
    batcher.close()


def test_the_controls_carry_start_end_ready_and_the_correlation_id(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path)
    values = [0, 11, 7, 1]
    answers = [
        output(batcher.infer(seq(1000, v, start=i == 0, end=i == len(values) - 1)))
        for i, v in enumerate(values)
    ]
    # simple_dyna_sequence: +1 on START, + the ID on END.
    assert answers == [1, 11, 7, 1 + 1000]
    first, last = instance.batches[0][0], instance.batches[-1][0]
    assert first.input("START").data.tolist() == [1]
    assert first.input("START").datatype == "INT32"
    assert first.input("READY").data.tolist() == [1.0]
    assert first.input("READY").datatype == "FP32"
    assert first.input("END").data.tolist() == [False]
    assert last.input("END").data.tolist() == [True]
    assert last.input("CORRID").datatype == "UINT64"
    assert last.input("CORRID").data.tolist() == [1000]
    batcher.close()


def test_string_ids_reach_an_integer_corrid_only_as_decimal_numbers(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path, corrid="TYPE_UINT32")
    assert output(batcher.infer(seq("77", 1, start=True, end=True))) == 1 + 1 + 77
    assert refusal(batcher, seq("abc", 1, start=True)) == (
        "inference request for sequence abc to model 'm': the model's CORRID control input "
        "'CORRID' is UINT32, so a string sequence_id must be a decimal number"
    )
    assert "does not fit the model's CORRID control input 'CORRID' (UINT32" in refusal(
        batcher, seq(1 << 40, 1, start=True)
    )
    batcher.close()


def test_a_string_corrid_gets_the_id_as_bytes(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path, corrid="TYPE_STRING")
    batcher.infer(seq("cam-3", 1, start=True))
    batcher.infer(seq(42, 1, start=True))
    assert instance.batches[0][0].input("CORRID").data.tolist() == [b"cam-3"]
    assert instance.batches[1][0].input("CORRID").data.tolist() == [b"42"]
    batcher.close()


def test_integer_and_string_ids_are_different_sequences(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path, max_batch=4, state=True)
    batcher.infer(seq(5, 10, start=True, batched=True))
    assert refusal(batcher, seq("5", 1, batched=True)).startswith(
        "inference request for sequence 5 to model 'm' must specify the START flag"
    )
    batcher.close()


def test_implicit_state_accumulates_per_sequence_and_restarts_on_start(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path, max_batch=4, state=True)
    a = [batcher.infer(seq(1, 5, start=True, batched=True))]
    b = [batcher.infer(seq(2, 100, start=True, batched=True))]
    a.append(batcher.infer(seq(1, 6, batched=True)))
    b.append(batcher.infer(seq(2, 1, batched=True)))
    a.append(batcher.infer(seq(1, 7, batched=True)))
    assert [output(r, "ACC") for r in a] == [5, 11, 18]
    assert [output(r, "ACC") for r in b] == [100, 101]
    assert output(batcher.infer(seq(1, 3, start=True, batched=True)), "ACC") == 3
    # The state input starts from zeros; the output state never reaches a
    # client that did not ask for it.
    assert instance.batches[0][0].input("INPUT_STATE").data.tolist() == [[0]]
    assert [t.name for t in a[0].outputs] == ["OUTPUT", "ACC"]
    only = batcher.infer(seq(2, 1, batched=True, outputs=("OUTPUT",)))
    assert [t.name for t in only.outputs] == ["OUTPUT"]
    assert instance.batches[-1][0].outputs[-1].name == "OUTPUT_STATE"
    batcher.close()


def test_a_model_that_does_not_return_its_state_fails_the_request(tmp_path):
    class Forgetful(FakeSequenceInstance):
        def execute(self, requests):
            results = super().execute(requests)
            for response in results:
                response.outputs = [t for t in response.outputs if t.name != "OUTPUT_STATE"]
            return results

    batcher = batcher_for([Forgetful()], tmp_path, max_batch=4, state=True)
    with pytest.raises(Exception) as caught:
        batcher.infer(seq(9, 1, start=True, batched=True))
    assert "did not return output state 'OUTPUT_STATE' for sequence 9" in str(caught.value)
    batcher.close()


def test_direct_batches_put_each_sequence_in_its_slot_and_pad_the_gaps(tmp_path):
    instance = FakeSequenceInstance(hold_first=True)
    batcher = batcher_for([instance], tmp_path, max_batch=4)
    for sid in (1, 2, 3):
        holder = Caller(batcher, seq(sid, sid, start=True, batched=True))
        if sid == 1:
            assert instance.entered.wait(5)
            instance.release.set()
        holder.join(10)
    assert len(instance.batches) == 3
    # Slots 0 and 2 have a request, slot 1 has none: a batch of 3, READY 1, 0, 1.
    instance._hold = True
    instance.release.clear()
    instance.entered.clear()
    blocker = Caller(batcher, seq(2, 50, batched=True))
    assert instance.entered.wait(5)
    callers = [Caller(batcher, seq(1, 10, batched=True)), Caller(batcher, seq(3, 30, batched=True))]
    wait_for(lambda: batcher.queue_size == 2, what="two requests queued")
    instance.release.set()
    for caller in [blocker, *callers]:
        caller.join(10)
    padded = instance.batches[-1]
    assert [r.input("READY").data.tolist() for r in padded] == [[[1.0]], [[0.0]], [[1.0]]]
    assert [r.input("INPUT").data.tolist() for r in padded] == [[[10]], [[0]], [[30]]]
    assert [output(c.response) for c in callers] == [10, 30]
    stats = batcher.statistics.snapshot()
    assert stats.inference_count == 6
    assert stats.execution_count == 5
    batcher.close()


def test_a_sequence_without_a_slot_waits_in_the_backlog_until_one_ends(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path, idle_us=60_000_000)
    batcher.infer(seq(1, 1, start=True))
    waiting = Caller(batcher, seq(2, 5, start=True))
    wait_for(lambda: batcher.queue_size == 1, what="the second sequence to queue")
    assert len(instance.batches) == 1
    batcher.infer(seq(1, 2, end=True))
    waiting.join(10)
    assert output(waiting.response) == 6
    batcher.close()


def test_an_idle_sequence_gives_up_its_slot_and_must_start_again(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path, idle_us=50_000)
    batcher.infer(seq(1, 1, start=True))
    waiting = Caller(batcher, seq(2, 5, start=True))
    waiting.join(10)
    assert waiting.error is None
    assert output(waiting.response) == 6
    assert refusal(batcher, seq(1, 2)).startswith(
        "inference request for sequence 1 to model 'm' must specify the START flag"
    )
    batcher.close()


def test_oldest_batches_the_oldest_requests_of_different_sequences(tmp_path):
    instance = FakeSequenceInstance(hold_first=True)
    strategy = "oldest { max_candidate_sequences: 3 preferred_batch_size: [ 3 ] }"
    batcher = batcher_for([instance], tmp_path, max_batch=4, strategy=strategy)
    blocker = Caller(batcher, seq(9, 0, start=True, batched=True))
    assert instance.entered.wait(5)
    callers = [Caller(batcher, seq(sid, sid, start=True, batched=True)) for sid in (1, 2)]
    wait_for(lambda: batcher.queue_size == 2, what="two starts queued")
    later = Caller(batcher, seq(1, 100, batched=True))
    wait_for(lambda: batcher.queue_size == 3, what="a second request of sequence 1")
    instance.release.set()
    for caller in [blocker, *callers, later]:
        caller.join(10)
    # Sequence 1's second request never shares a batch with its first.
    assert [len(b) for b in instance.batches] == [1, 2, 1]
    assert [r.input("CORRID").data.tolist() for r in instance.batches[1]] == [[[1]], [[2]]]
    assert output(later.response) == 100
    batcher.close()


def test_oldest_without_max_candidate_sequences_has_max_batch_size_slots(tmp_path):
    """Triton 2.51 (probed) takes max_batch_size sequences at once when
    max_candidate_sequences is 0, as config_rules' message says."""
    strategy = "oldest { }"
    batcher = batcher_for(
        [FakeSequenceInstance()], tmp_path, max_batch=4, strategy=strategy, idle_us=60_000_000
    )
    callers = [Caller(batcher, seq(sid, sid, start=True, batched=True)) for sid in (1, 2, 3, 4)]
    for caller in callers:
        caller.join(10)
    assert [caller.response is not None for caller in callers] == [True] * 4
    fifth = Caller(batcher, seq(5, 5, start=True, batched=True))
    wait_for(lambda: batcher.queue_size == 1, what="the fifth sequence to wait for a slot")
    batcher.infer(seq(1, 1, end=True, batched=True))
    fifth.join(10)
    assert output(fifth.response) == 6
    batcher.close()


def test_a_cancelled_request_is_dropped_unless_it_starts_or_ends_its_sequence(tmp_path):
    instance = FakeSequenceInstance(hold_first=True)
    batcher = batcher_for([instance], tmp_path, max_batch=4)
    blocker = Caller(batcher, seq(1, 1, start=True, batched=True))
    assert instance.entered.wait(5)
    gone_start = seq(2, 2, start=True, batched=True)
    gone_start.is_cancelled = lambda: True
    starter = Caller(batcher, gone_start)
    wait_for(lambda: batcher.queue_size == 1, what="the start to queue")
    gone = seq(1, 3, batched=True)
    gone.is_cancelled = lambda: True
    dropped = Caller(batcher, gone)
    wait_for(lambda: batcher.queue_size == 2, what="the cancelled request to queue")
    instance.release.set()
    for caller in (blocker, starter, dropped):
        caller.join(10)
    assert isinstance(dropped.error, Cancelled)
    assert starter.error is None
    ran = [r.input("INPUT").data.item() for b in instance.batches for r in b]
    assert 3 not in ran and 2 in ran
    batcher.close()


def test_a_warmup_request_is_a_sequence_of_its_own(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path)
    warm = request(4, sequence_id=WARMUP_SEQUENCE, sequence_start=True, sequence_end=True)
    assert output(batcher.infer(warm)) == 5
    assert instance.batches[0][0].input("CORRID").data.tolist() == [0]
    assert batcher.active_sequences == 0
    batcher.close()


def test_unloading_refuses_the_backlog_and_later_requests(tmp_path):
    instance = FakeSequenceInstance()
    batcher = batcher_for([instance], tmp_path, idle_us=60_000_000)
    batcher.infer(seq(1, 1, start=True))
    waiting = Caller(batcher, seq(2, 5, start=True))
    wait_for(lambda: batcher.queue_size == 1, what="the second sequence to queue")
    batcher.close()
    waiting.join(10)
    assert isinstance(waiting.error, Unavailable)
    assert "unloaded before sequence 2 got a slot" in str(waiting.error)
    with pytest.raises(Unavailable):
        batcher.infer(seq(3, 1, start=True))


def test_after_a_queued_end_only_a_new_start_is_taken(tmp_path):
    instance = FakeSequenceInstance(hold_first=True)
    batcher = batcher_for([instance], tmp_path)
    blocker = Caller(batcher, seq(1, 1, start=True))
    assert instance.entered.wait(5)
    ender = Caller(batcher, seq(1, 2, end=True))
    wait_for(lambda: batcher.queue_size == 1, what="the END to queue")
    assert refusal(batcher, seq(1, 3)).startswith(
        "inference request for sequence 1 to model 'm' must specify the START flag"
    )
    restart = Caller(batcher, seq(1, 4, start=True, end=True))
    wait_for(lambda: batcher.queue_size == 2, what="the new START to queue")
    instance.release.set()
    for caller in (blocker, ender, restart):
        caller.join(10)
    assert [output(c.response) for c in (blocker, ender, restart)] == [2, 2 + 1, 5 + 1]
    assert batcher.active_sequences == 0
    batcher.close()


def test_one_instance_never_runs_two_batches_at_once_and_each_sequence_keeps_its_order(
    tmp_path,
):
    inside = []
    overlaps = []
    lock = threading.Lock()

    class Exclusive(FakeSequenceInstance):
        def execute(self, requests):
            with lock:
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(len(inside))
            try:
                time.sleep(0.001)  # the model's compute: a window for an overlap to show
                return super().execute(requests)
            finally:
                with lock:
                    inside.pop()

    batcher = batcher_for([Exclusive()], tmp_path, max_batch=4, state=True)
    sums = {}

    class Client(threading.Thread):
        def __init__(self, sid: int) -> None:
            super().__init__(daemon=True)
            self.sid = sid
            self.start()

        def run(self) -> None:
            for step in range(30):
                response = batcher.infer(seq(self.sid, step, start=step == 0, batched=True))
                sums[self.sid] = output(response, "ACC")

    clients = [Client(sid) for sid in range(1, 7)]
    for client in clients:
        client.join(30)
    assert not overlaps
    assert sums == {sid: sum(range(30)) for sid in range(1, 7)}
    batcher.close()


def test_an_overlong_string_id_is_refused_without_being_echoed(tmp_path):
    batcher = batcher_for([FakeSequenceInstance()], tmp_path, corrid="TYPE_STRING")
    text = refusal(batcher, seq("7" * 100_000, 1, start=True))
    assert text == (
        "inference request to model 'm': parameter 'sequence_id' is a string of 100000 "
        "characters, more than the 256 allowed"
    )
    assert output(batcher.infer(seq("x" * 256, 1, start=True, end=True))) == 2
    batcher.close()
