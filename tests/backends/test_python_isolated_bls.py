"""An isolated python model's BLS calls overlap, as they do in-process and in
Triton's stub process: gathered ``async_exec`` calls and calls from threads
of the model are in flight at once (at most ``MAX_CONCURRENT_BLS`` served at
a time per process, the rest queued), each answer reaches its own caller, a
failing call fails alone, and a process that dies or is unloaded mid-BLS
hangs nothing.

The daemon's infer function stands in for the target model: it holds each
call until the others have arrived (a barrier with a short timeout, so calls
that take turns fail the test instead of hanging it).
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python.isolated_bls import MAX_CONCURRENT_BLS
from edgebox.backends.python.isolation import IsolationOptions
from edgebox.backoff import Backoff
from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, Tensor

OPTIONS = IsolationOptions(
    mode="process", restart_backoff=Backoff(initial_s=0.05, max_s=0.2), finalize_timeout_s=2.0
)
BARRIER_TIMEOUT_S = 5.0

CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# Python_backend's async BLS pattern: CALLS async_exec calls awaited together,
# the i-th sending IN + i; OUT holds each answer's first element, in call
# order, or -1 where the call answered an error.
GATHER_MODEL = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()
        calls = [
            pb_utils.InferenceRequest(
                model_name=TARGET, requested_output_names=["Y"],
                inputs=[pb_utils.Tensor("X", x + i)],
            ).async_exec()
            for i in range(CALLS)
        ]
        answers = await asyncio.gather(*calls)
        out = [
            -1.0 if a.has_error() else float(pb_utils.get_output_tensor_by_name(a, "Y").as_numpy()[0])
            for a in answers
        ]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(out, np.float32))])]
"""

# The same from CALLS threads of the model, each calling exec().
THREADS_MODEL = """
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()
        out = [0.0] * CALLS

        def call(i):
            answer = pb_utils.InferenceRequest(
                model_name="target", requested_output_names=["Y"],
                inputs=[pb_utils.Tensor("X", x + i)],
            ).exec()
            out[i] = float(pb_utils.get_output_tensor_by_name(answer, "Y").as_numpy()[0])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(CALLS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(out, np.float32))])]
"""


def gather_model(calls: int, target: str = '"target"') -> str:
    return GATHER_MODEL.replace("CALLS", str(calls)).replace("TARGET", target)


def tenfold(request: InferRequest) -> InferResponse:
    x = request.input("X").data
    return InferResponse(request.model_name, "1", [Tensor("Y", "FP32", x * 10)])


def in_request(value: float) -> InferRequest:
    return InferRequest("m", [Tensor("IN", "FP32", np.array([value], np.float32))])


class Loaded:
    def __init__(self, backend: Backend, context: ModelContext, instance) -> None:
        self.backend = backend
        self.context = context
        self.instance = instance
        self.closed = False

    def infer_one(self, request: InferRequest) -> InferResponse | EdgeboxError:
        (result,) = self.instance.execute([request])
        return result

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.instance.close()
            self.backend.unload(self.context)


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Callable[..., Loaded]]:
    loaded: list[Loaded] = []

    def load_model(model_py: str, infer) -> Loaded:
        model_dir = tmp_path / "m"
        (model_dir / "1").mkdir(parents=True)
        (model_dir / "config.pbtxt").write_text(CONFIG)
        (model_dir / "1" / "model.py").write_text(textwrap.dedent(model_py).lstrip())
        context = ModelContext(
            "m", 1, read_model_config(model_dir), model_dir, model_dir / "1", infer=infer
        )
        backend = Backend(OPTIONS)
        backend.complete_config(context)
        model = Loaded(backend, context, backend.load_instance(context, InstanceSpec("m_0", "CPU")))
        loaded.append(model)
        return model

    yield load_model
    for model in loaded:
        model.close()


def expect_out(result: object) -> list[float]:
    assert isinstance(result, InferResponse), f"expected a response, got {result!r}"
    return result.output("OUT").data.tolist()


def test_gathered_async_exec_calls_are_in_flight_at_once(load) -> None:
    all_arrived = threading.Barrier(4, timeout=BARRIER_TIMEOUT_S)

    def infer(request: InferRequest) -> InferResponse:
        all_arrived.wait()
        return tenfold(request)

    model = load(gather_model(4), infer)
    assert expect_out(model.infer_one(in_request(1))) == [10, 20, 30, 40]


def test_each_answer_reaches_its_own_caller_when_they_come_back_in_reverse(load) -> None:
    """All four are held until the last arrives, then answered last-sent
    first: a reply given to the oldest waiter would show in the output."""
    calls = 4
    arrived: list[float] = []
    answered: list[float] = []
    turn = threading.Condition()

    def infer(request: InferRequest) -> InferResponse:
        value = float(request.input("X").data[0])
        with turn:
            arrived.append(value)
            turn.notify_all()

            def my_turn() -> bool:
                later = [v for v in arrived if v > value]
                return len(arrived) == calls and all(v in answered for v in later)

            if not turn.wait_for(my_turn, BARRIER_TIMEOUT_S):
                raise Unavailable(f"call {value} timed out; arrived {arrived}")
        response = tenfold(request)
        with turn:
            answered.append(value)
            turn.notify_all()
        return response

    model = load(gather_model(calls), infer)
    for first in (1.0, 100.0):
        arrived.clear()
        answered.clear()
        out = expect_out(model.infer_one(in_request(first)))
        assert out == [(first + i) * 10 for i in range(calls)]
        assert answered == sorted(arrived, reverse=True)


def test_a_failing_call_fails_alone_among_gathered_calls(load) -> None:
    others_arrived = threading.Barrier(3, timeout=BARRIER_TIMEOUT_S)

    def infer(request: InferRequest) -> InferResponse:
        if float(request.input("X").data[0]) == 2:
            raise Unavailable("model 'target' is not ready")
        others_arrived.wait()
        return tenfold(request)

    model = load(gather_model(4), infer)
    assert expect_out(model.infer_one(in_request(0))) == [0, 10, -1, 30]


def test_threads_of_the_model_issue_bls_calls_at_once(load) -> None:
    all_arrived = threading.Barrier(4, timeout=BARRIER_TIMEOUT_S)

    def infer(request: InferRequest) -> InferResponse:
        all_arrived.wait()
        return tenfold(request)

    model = load(THREADS_MODEL.replace("CALLS", "4"), infer)
    assert expect_out(model.infer_one(in_request(5))) == [50, 60, 70, 80]


def test_calls_past_the_cap_queue_and_all_complete(load) -> None:
    calls = MAX_CONCURRENT_BLS + 4
    lock = threading.Condition()
    in_flight = 0
    peak = 0
    gave_up = False

    def infer(request: InferRequest) -> InferResponse:
        nonlocal in_flight, peak, gave_up
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            lock.notify_all()
            if not gave_up and not lock.wait_for(
                lambda: peak >= MAX_CONCURRENT_BLS, BARRIER_TIMEOUT_S
            ):
                gave_up = True
            in_flight -= 1
        return tenfold(request)

    model = load(THREADS_MODEL.replace("CALLS", str(calls)), infer)
    out = expect_out(model.infer_one(in_request(0)))
    assert out == [i * 10 for i in range(calls)]
    assert peak == MAX_CONCURRENT_BLS


def test_a_process_killed_mid_bls_fails_its_request_and_restarts(load) -> None:
    holder: list[Loaded] = []
    both_arrived = threading.Barrier(2, timeout=BARRIER_TIMEOUT_S)

    def infer(request: InferRequest) -> InferResponse:
        both_arrived.wait()
        if float(request.input("X").data[0]) == -1:
            os.kill(holder[0].instance.pid, signal.SIGKILL)
        return tenfold(request)

    model = load(gather_model(2), infer)
    holder.append(model)
    old_pid = model.instance.pid
    result = model.infer_one(in_request(-1))
    assert isinstance(result, EdgeboxError), result
    assert "python model process exited with signal SIGKILL (killed by" in str(result)
    assert "during execute() (instance 'm_0'" in str(result)
    wait_for(
        lambda: model.instance.pid not in (None, old_pid),
        timeout_s=30,
        what="the python model process to restart",
    )
    both_arrived.reset()
    assert expect_out(model.infer_one(in_request(1))) == [10, 20]


def test_unloading_while_bls_calls_are_in_flight_does_not_hang(load) -> None:
    release = threading.Event()
    arrived = threading.Barrier(3, timeout=BARRIER_TIMEOUT_S)

    def infer(request: InferRequest) -> InferResponse:
        arrived.wait()
        release.wait(BARRIER_TIMEOUT_S)
        return tenfold(request)

    model = load(gather_model(2), infer)
    results: list[object] = []
    caller = threading.Thread(target=lambda: results.append(model.infer_one(in_request(1))))
    caller.start()
    arrived.wait()
    closer = threading.Thread(target=model.close)
    closer.start()
    closer.join(OPTIONS.finalize_timeout_s + 10)
    assert not closer.is_alive(), "unload hung with BLS calls in flight"
    release.set()
    caller.join(10)
    assert not caller.is_alive(), "the request hung after its process was stopped"
    assert isinstance(results[0], EdgeboxError), results
    assert "python model process" in str(results[0])
