"""BLS and ``async def execute`` as python_backend's examples use them: a model
name read from a BYTES input, ``async_exec`` calls awaited together with
``asyncio.gather``, and a decoupled async model holding many requests on its
instance's event loop while other models keep answering."""

from __future__ import annotations

import textwrap
import threading
import time

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python.isolation import IsolationOptions
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, Tensor
from fakes import blocking_gate
from fakes.response_sink import FakeStreamSink
from model_fixtures import add_add_sub, write_model


class LoadedModel:
    def __init__(self, instance) -> None:
        self.instance = instance

    def infer(self, *requests: InferRequest) -> list:
        return self.instance.execute(list(requests))


@pytest.fixture
def load_model(tmp_path):
    """Writes, completes and loads a python model in-process; closes and
    unloads it at teardown."""
    loaded: list[tuple[Backend, ModelContext, object]] = []

    def load(
        model_py: str, config: str, name: str = "m", infer=None, isolation: str = "in_process"
    ) -> LoadedModel:
        model_dir = write_model(tmp_path, name, config, {"1/model.py": textwrap.dedent(model_py)})
        context = ModelContext(
            name, 1, read_model_config(model_dir), model_dir, model_dir / "1", infer=infer
        )
        backend = Backend(IsolationOptions(mode=isolation, finalize_timeout_s=5.0))
        backend.complete_config(context)
        instance = backend.load_instance(context, InstanceSpec(f"{name}_0", "CPU"))
        loaded.append((backend, context, instance))
        return LoadedModel(instance)

    yield load
    for backend, context, instance in loaded:
        instance.close()
        backend.unload(context)


# In the shape of python_backend's examples/bls model.py: the model to call is
# named by a BYTES input, passed on as ``as_numpy()[0]`` (a bytes object).
BYTES_NAME_CONFIG = """
backend: "python"
input [
  { name: "MODEL_NAME" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }
]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

BYTES_NAME_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME")
            model_name_string = model_name.as_numpy()[0]
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            infer_request = pb_utils.InferenceRequest(
                model_name=model_name_string,
                requested_output_names=["Y"],
                inputs=[pb_utils.Tensor("X", x.as_numpy())],
            )
            infer_response = infer_request.exec()
            if infer_response.has_error():
                raise pb_utils.TritonModelException(infer_response.error().message())
            y = pb_utils.get_output_tensor_by_name(infer_response, "Y")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y.as_numpy())]))
        return responses
"""


def doubling(request: InferRequest) -> InferResponse:
    x = request.input("X").data
    return InferResponse(request.model_name, "1", outputs=[Tensor("Y", "FP32", x * 2)])


def named_request(name: object) -> InferRequest:
    return InferRequest(
        "caller",
        [
            Tensor("MODEL_NAME", "BYTES", np.array([name], dtype=np.object_)),
            Tensor("IN", "FP32", np.array([1.5, 2], dtype=np.float32)),
        ],
    )


def test_bls_model_name_may_be_bytes(load_model) -> None:
    seen: list[str] = []

    def infer(request: InferRequest) -> InferResponse:
        seen.append(request.model_name)
        return doubling(request)

    model = load_model(BYTES_NAME_MODEL, BYTES_NAME_CONFIG, name="caller", infer=infer)
    (result,) = model.infer(named_request(b"doubler"))
    assert isinstance(result, InferResponse), result
    np.testing.assert_array_equal(result.output("OUT").data, [3, 4])
    assert seen == ["doubler"]
    assert type(seen[0]) is str


NAME_TYPE_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        pb_utils.InferenceRequest(model_name=NAME, inputs=[], requested_output_names=[])
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("5", "model_name must be a str (or UTF-8 bytes), got int"),
        ("b'\\xff'", "model_name is not valid UTF-8: b'\\xff'"),
    ],
)
def test_bls_model_name_of_another_type_is_a_type_error(load_model, name, problem) -> None:
    model = load_model(NAME_TYPE_MODEL.replace("NAME", name), BYTES_NAME_CONFIG, name="caller")
    (result,) = model.infer(named_request(b"x"))
    assert (
        str(result)
        == f"model 'caller' version 1: execute() raised TypeError: {problem} (model.py line 6)"
    )


# In the shape of python_backend's async BLS example: an async execute that
# awaits two async_exec calls together.
GATHER_MODEL = """
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            calls = [
                pb_utils.InferenceRequest(
                    model_name=name, requested_output_names=["Y"], inputs=[pb_utils.Tensor("X", x)]
                ).async_exec()
                for name in ("left", "right")
            ]
            left, right = await asyncio.gather(*calls)
            for answer in (left, right):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            total = sum(pb_utils.get_output_tensor_by_name(a, "Y").as_numpy() for a in (left, right))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", total)]))
        return responses
"""

ECHO_CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def test_async_exec_calls_gathered_run_at_the_same_time(load_model) -> None:
    both_in_flight = threading.Barrier(2, timeout=5)

    def infer(request: InferRequest) -> InferResponse:
        both_in_flight.wait()
        return doubling(request)

    model = load_model(GATHER_MODEL, ECHO_CONFIG, infer=infer)
    (result,) = model.infer(
        InferRequest("m", [Tensor("IN", "FP32", np.array([1, 2], dtype=np.float32))])
    )
    assert isinstance(result, InferResponse), result
    np.testing.assert_array_equal(result.output("OUT").data, [4, 8])


def test_isolated_async_execute_gathers_async_exec_calls_each_to_its_own_answer(
    load_model,
) -> None:
    """An isolated model's gathered BLS calls are in flight together on one
    channel; each gets its own answer, in the model's order, however the
    daemon's answers interleave (test_python_isolated_bls.py pins the overlap)."""

    def infer(request: InferRequest) -> InferResponse:
        time.sleep(0.02)  # the model's work: the two calls' answers can cross
        factor = 3 if request.model_name == "left" else 2
        x = request.input("X").data
        return InferResponse(request.model_name, "1", outputs=[Tensor("Y", "FP32", x * factor)])

    left_minus_right = GATHER_MODEL.replace(
        "total = sum(", "total = (lambda left, right: left - right)(*list("
    ).replace("for a in (left, right))", "for a in (left, right)))")
    model = load_model(left_minus_right, ECHO_CONFIG, infer=infer, isolation="process")
    for _ in range(8):
        (result,) = model.infer(
            InferRequest("m", [Tensor("IN", "FP32", np.array([1, 2], dtype=np.float32))])
        )
        assert isinstance(result, InferResponse), result
        np.testing.assert_array_equal(result.output("OUT").data, [1, 2])


def test_async_execute_keeps_one_event_loop_per_instance(load_model) -> None:
    loop_model = """
    import asyncio

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            loop = id(asyncio.get_running_loop())
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([loop], np.float64))])
                for _ in requests
            ]
    """
    model = load_model(
        loop_model,
        ECHO_CONFIG.replace(
            '[ { name: "OUT" data_type: TYPE_FP32', '[ { name: "OUT" data_type: TYPE_FP64'
        ),
    )
    request = InferRequest("m", [Tensor("IN", "FP32", np.array([1], dtype=np.float32))])
    first, second = (model.infer(request)[0] for _ in range(2))
    assert first.output("OUT").data[0] == second.output("OUT").data[0]


# A decoupled async model as python_backend 24.04+ runs one: each request's
# coroutine runs on the instance's event loop, so the instance takes the next
# request while earlier ones wait.
SLOW_ASYNC_CONFIG = """
name: "slow"
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

SLOW_ASYNC_MODEL = """
import asyncio

import triton_python_backend_utils as pb_utils
from fakes import blocking_gate
from fakes.response_sink import FakeStreamSink


class TritonPythonModel:
    def initialize(self, args):
        self.in_flight = 0

    async def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            self.in_flight += 1
            if self.in_flight == 2:
                blocking_gate.entered.set()
            released = await asyncio.to_thread(blocking_gate.release.wait, 10)
            if not released:
                raise pb_utils.TritonModelException("never released")
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            sender.send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x.as_numpy())]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""


def test_two_requests_to_a_slow_async_model_in_flight_while_another_model_answers(
    stack, tmp_path
) -> None:
    write_model(tmp_path, "slow", SLOW_ASYNC_CONFIG, {"1/model.py": SLOW_ASYNC_MODEL})
    add_add_sub(tmp_path)
    stack.manager.load_model("slow")
    stack.manager.load_model("add_sub")
    sinks = [FakeStreamSink(), FakeStreamSink()]
    for value, sink in zip((7, 8), sinks, strict=True):
        request = InferRequest("slow", [Tensor("IN", "INT32", np.array([value], np.int32))])
        threading.Thread(target=stack.dataplane.infer_stream, args=(request, sink)).start()
    wait_for(blocking_gate.entered.is_set, timeout_s=10, what="both requests inside execute")
    data = np.ones((1, 16), dtype=np.float32)
    answer = stack.dataplane.infer(
        InferRequest("add_sub", [Tensor("INPUT0", "FP32", data), Tensor("INPUT1", "FP32", data)])
    )
    np.testing.assert_array_equal(answer.output("OUTPUT0").data, np.full((1, 16), 2))
    blocking_gate.release.set()
    for value, sink in zip((7, 8), sinks, strict=True):
        wait_for(sink.final.is_set, timeout_s=10, what="the final send")
        ((response, final),) = sink.sends
        assert final and int(response.outputs[0].data[0]) == value
