"""Isolated python models (``EDGEBOX_ISOLATION: process``) keep the in-process
contract while running in a child process: the same ``initialize`` arguments,
tensors both ways (BYTES included), errors per response, auto-complete and
BLS; and a child that crashes, runs out of memory or hangs in ``finalize``
fails only its own requests, is restarted, and is reaped.

Each test writes a model folder under ``tmp_path`` and drives it through the
backend contract, as the lifecycle manager does.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends import BackendCatalog
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python.isolated import IsolatedInstance
from edgebox.backends.python.isolation import IsolationOptions
from edgebox.backoff import Backoff
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.settings.top_level import PYTHON_ISOLATION_MODES
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor

FAST_RESTARTS = IsolationOptions(
    mode="process", restart_backoff=Backoff(initial_s=0.05, max_s=0.2), finalize_timeout_s=2.0
)

XY_CONFIG = """
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [
  { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }
]
"""

# Doubles X; negative first elements pick a way to die.
CRASHING_MODEL = """
import ctypes
import os
import signal

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x.size and x[0] == -1:
                os._exit(3)
            if x.size and x[0] == -2:
                ctypes.string_at(0)
            if x.size and x[0] == -3:
                np.ones(1 << 30, np.uint8)  # 1 GiB, past the test's memory limit
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("Y", x * 2),
                pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
            ]))
        return responses
"""


class Loaded:
    def __init__(self, backend: Backend, context: ModelContext, instance: IsolatedInstance):
        self.backend = backend
        self.context = context
        self.instance = instance
        self.health: list[tuple[bool, str]] = []
        context.health = lambda ready, reason: self.health.append((ready, reason))

    def infer(self, *requests: InferRequest) -> list[InferResponse | EdgeboxError]:
        results = self.instance.execute(list(requests))
        assert len(results) == len(requests)
        return results

    def respawned(self, old_pid: int) -> int:
        return wait_for(
            lambda: self.instance.pid not in (None, old_pid) and self.instance.pid,
            timeout_s=30,
            what="the python model process to restart",
        )


def write_model(root: Path, model_py: str, config: str, name: str = "m") -> Path:
    model_dir = root / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config))
    (model_dir / "1" / "model.py").write_text(textwrap.dedent(model_py).lstrip())
    return model_dir


def context_of(model_dir: Path, infer=None) -> ModelContext:
    config = read_model_config(model_dir)
    return ModelContext(model_dir.name, 1, config, model_dir, model_dir / "1", infer=infer)


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Callable[..., Loaded]]:
    """Writes, completes and loads an isolated model; closes and unloads it at
    teardown and checks its processes were reaped."""
    loaded: list[Loaded] = []

    def load_model(
        model_py: str,
        config: str = XY_CONFIG,
        name: str = "m",
        infer=None,
        options: IsolationOptions = FAST_RESTARTS,
    ) -> Loaded:
        backend = Backend(options)
        context = context_of(write_model(tmp_path, model_py, config, name), infer)
        backend.complete_config(context)
        instance = backend.load_instance(context, InstanceSpec(f"{name}_0", "CPU"))
        model = Loaded(backend, context, instance)
        loaded.append(model)
        return model

    yield load_model
    for model in loaded:
        model.instance.close()
        model.backend.unload(model.context)
    assert _children() == [], "python model processes were left running"


def _children() -> list[int]:
    """Live (non-zombie) child processes of this test process."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            pids.append(int(entry.name))
    return pids


def xy_request(*values: float) -> InferRequest:
    return InferRequest("m", [Tensor("X", "FP32", np.array(values, np.float32))], id="req-1")


def expect_response(result: object) -> InferResponse:
    assert isinstance(result, InferResponse), f"expected a response, got {result!r}"
    return result


def expect_error(result: object) -> EdgeboxError:
    assert isinstance(result, EdgeboxError), f"expected an error, got {result!r}"
    return result


# ---------------------------------------------------------------- the contract, in a child


def test_model_runs_in_a_process_of_its_own(load) -> None:
    model = load(CRASHING_MODEL)
    response = expect_response(model.infer(xy_request(1, 2, 3))[0])
    np.testing.assert_array_equal(response.output("Y").data, [2, 4, 6])
    pid = int(response.output("PID").data[0])
    assert pid != os.getpid() and pid == model.instance.pid
    assert (response.model_name, response.model_version, response.id) == ("m", "1", "req-1")
    assert model.context.notes == ["runs in its own process (memory limit: 2048 MB)"]


def test_initialize_gets_the_same_arguments_as_in_process(load) -> None:
    model_py = """
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.args = args

        def execute(self, requests):
            text = json.dumps(self.args, sort_keys=True).encode()
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("ARGS", np.array([text], object))])
                for _ in requests
            ]
    """
    config = """
    backend: "python"
    input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "ARGS" data_type: TYPE_STRING dims: [ 1 ] } ]
    """
    model = load(model_py, config)
    response = expect_response(model.infer(xy_request(1))[0])
    args = json.loads(response.output("ARGS").data[0])
    assert {k: v for k, v in args.items() if k != "model_config"} == {
        "model_instance_kind": "CPU",
        "model_instance_name": "m_0",
        "model_instance_device_id": "0",
        "model_repository": str(model.context.model_dir),
        "model_version": "1",
        "model_name": "m",
    }
    assert json.loads(args["model_config"])["output"][0]["name"] == "ARGS"


def test_bytes_tensors_and_batches_cross_the_process_boundary(load) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
                upper = np.array([item.upper() for item in text.flat], object).reshape(text.shape)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("UPPER", upper)]))
            return responses
    """
    config = """
    backend: "python"
    input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1, -1 ] } ]
    output [ { name: "UPPER" data_type: TYPE_STRING dims: [ -1, -1 ] } ]
    """
    model = load(model_py, config)
    first = np.array([[b"ab", b""], [b"\xff\x00c", "é".encode()]], object)
    second = np.array([[b"x"]], object)
    results = model.infer(
        InferRequest("m", [Tensor("TEXT", "BYTES", first)]),
        InferRequest("m", [Tensor("TEXT", "BYTES", second)]),
    )
    upper = expect_response(results[0]).output("UPPER")
    assert upper.datatype == "BYTES"
    assert upper.data.tolist() == [[b"AB", b""], [b"\xff\x00C", "é".encode()]]
    assert expect_response(results[1]).output("UPPER").data.tolist() == [[b"X"]]


def test_strided_inputs_and_requested_outputs(load) -> None:
    model = load(CRASHING_MODEL)
    strided = np.arange(10, dtype=np.float32)[::2]
    request = InferRequest("m", [Tensor("X", "FP32", strided)], outputs=[RequestedOutput("Y")])
    response = expect_response(model.infer(request)[0])
    assert [t.name for t in response.outputs] == ["Y"]
    np.testing.assert_array_equal(response.output("Y").data, [0, 4, 8, 12, 16])


def test_outputs_are_arrays_of_their_own(load) -> None:
    """The output region is reused by the next request; a response must not see it."""
    model = load(CRASHING_MODEL)
    first = expect_response(model.infer(xy_request(1, 1))[0]).output("Y").data
    expect_response(model.infer(xy_request(5, 5))[0])
    np.testing.assert_array_equal(first, [2, 2])


def test_errors_per_response_keep_their_code_and_text(load) -> None:
    model_py = """
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
            if x[0] > 0:
                raise ZeroDivisionError("division by zero")
            error = pb_utils.TritonError("X must be positive", pb_utils.TritonError.INVALID_ARG)
            return [pb_utils.InferenceResponse(error=error)]
    """
    model = load(model_py)
    refused = expect_error(model.infer(xy_request(-1))[0])
    assert str(refused) == "model 'm' version 1: X must be positive"
    assert refused.code is ErrorCode.INVALID_ARG
    raised = expect_error(model.infer(xy_request(1))[0])
    assert str(raised) == (
        "model 'm' version 1: execute() raised ZeroDivisionError: division by zero "
        "(model.py line 8)"
    )
    assert raised.code is ErrorCode.INTERNAL
    assert model.instance.pid is not None, "an exception must not end the process"


def test_auto_complete_config_runs_in_the_child_and_completes_the_daemons_config(load) -> None:
    model_py = """
    import os

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [-1]})
            config.add_output({"name": f"Y_{os.getpid()}", "data_type": "TYPE_FP32", "dims": [-1]})
            config.set_max_batch_size(4)
            return config

        def execute(self, requests):
            return []
    """
    model = load(model_py, 'backend: "python"\n')
    config = model.context.config
    assert config.max_batch_size == 4
    assert [i.name for i in config.input] == ["X"]
    (output,) = config.output
    assert output.name == f"Y_{model.instance.pid}", "completed in the instance's own process"


def test_bls_calls_go_through_the_daemons_infer_function(load) -> None:
    seen: list[InferRequest] = []

    def infer(request: InferRequest) -> InferResponse:
        seen.append(request)
        if request.model_name == "missing":
            raise Unavailable("unknown model 'missing'")
        doubled = request.inputs[0].data * 2
        return InferResponse(request.model_name, "3", [Tensor("OUT", "FP32", doubled)])

    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "X")
            answer = pb_utils.InferenceRequest(
                model_name="helper", inputs=[pb_utils.Tensor("IN", x.as_numpy())],
                requested_output_names=["OUT"],
            ).exec()
            missing = pb_utils.InferenceRequest(
                model_name="missing", inputs=[], requested_output_names=[],
            ).exec()
            y = pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()
            pid = np.array([len(missing.error().message())], np.int64)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", y),
                                                pb_utils.Tensor("PID", pid)])]
    """
    model = load(model_py, infer=infer)
    response = expect_response(model.infer(xy_request(1.5, 2))[0])
    np.testing.assert_array_equal(response.output("Y").data, [3, 4])
    assert int(response.output("PID").data[0]) == len("unknown model 'missing'")
    assert [r.model_name for r in seen] == ["helper", "missing"]
    np.testing.assert_array_equal(seen[0].inputs[0].data, [1.5, 2])


def test_an_input_the_model_keeps_is_not_overwritten_by_the_next_request(load) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.previous = None

        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
            previous = x if self.previous is None else self.previous
            self.previous = x
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", previous.copy()),
                                                pb_utils.Tensor("PID", np.zeros(1, np.int64))])]
    """
    model = load(model_py)
    model.infer(xy_request(1, 1))
    for value in (2, 3, 4):
        response = expect_response(model.infer(xy_request(value, value))[0])
        np.testing.assert_array_equal(response.output("Y").data, [value - 1, value - 1])


def test_the_input_region_is_reused_when_the_model_keeps_nothing(load) -> None:
    model = load(CRASHING_MODEL)
    regions = set()
    for value in range(5):
        expect_response(model.infer(xy_request(value, value))[0])
        regions.add(os.fstat(model.instance._process._inputs.fd).st_ino)
    assert len(regions) == 1


# ---------------------------------------------------------------- crashes


def test_a_process_that_exits_fails_its_requests_and_is_restarted(load) -> None:
    model = load(CRASHING_MODEL)
    pid = model.instance.pid
    crashed = expect_error(model.infer(xy_request(-1))[0])
    assert str(crashed) == (
        f"model 'm' version 1: python model process exited with code 3 during execute() "
        f"(instance 'm_0', pid {pid}); it is being restarted"
    )
    assert crashed.code is ErrorCode.INTERNAL
    model.respawned(pid)
    response = expect_response(model.infer(xy_request(4))[0])
    np.testing.assert_array_equal(response.output("Y").data, [8])
    wait_for(lambda: model.health[-1:] == [(True, "")], what="health back to ready")
    assert model.health[0] == (
        False,
        "instance 'm_0': python model process exited with code 3; restarting in 0.05 s",
    )


def test_a_segfault_is_reported_with_its_signal(load) -> None:
    model = load(CRASHING_MODEL)
    pid = model.instance.pid
    crashed = expect_error(model.infer(xy_request(-2))[0])
    assert str(crashed) == (
        f"model 'm' version 1: python model process exited with signal SIGSEGV during "
        f"execute() (instance 'm_0', pid {pid}); it is being restarted"
    )
    model.respawned(pid)
    expect_response(model.infer(xy_request(1))[0])


def test_requests_while_the_process_is_down_are_unavailable(load) -> None:
    slow = IsolationOptions(mode="process", restart_backoff=Backoff(initial_s=60, max_s=60))
    model = load(CRASHING_MODEL, options=slow)
    expect_error(model.infer(xy_request(-1))[0])
    wait_for(lambda: model.instance.pid is None, what="the instance to notice the exit")
    down = expect_error(model.infer(xy_request(1))[0])
    assert isinstance(down, Unavailable)
    assert str(down) == (
        "model 'm' version 1: the python model process of instance 'm_0' exited with code 3 "
        "and is being restarted; retry later"
    )
    assert model.health == [
        (False, "instance 'm_0': python model process exited with code 3; restarting in 60 s")
    ]


def test_a_process_past_its_memory_limit_is_restarted_and_says_so(load) -> None:
    config = XY_CONFIG + 'parameters { key: "EDGEBOX_MEMORY_LIMIT_MB" value: { string_value: "600" } }\n'
    model = load(CRASHING_MODEL, config)
    assert model.context.notes == ["runs in its own process (memory limit: 600 MB)"]
    pid = model.instance.pid
    error = expect_error(model.infer(xy_request(-3))[0])
    assert str(error).startswith("model 'm' version 1: execute() raised MemoryError: ")
    assert str(error).endswith(
        "(model.py line 19); the python model process reached its memory limit of 600 MB and "
        "is being restarted"
    )
    model.respawned(pid)
    assert model.health[0] == (
        False,
        "instance 'm_0': python model process reached its memory limit of 600 MB; "
        "restarting in 0.05 s",
    )
    expect_response(model.infer(xy_request(1))[0])


def test_a_model_that_dies_on_import_fails_its_load(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "import os\nos._exit(7)\n", XY_CONFIG)
    context = context_of(model_dir)
    backend = Backend(FAST_RESTARTS)
    with pytest.raises(Unavailable) as caught:
        backend.complete_config(context)
    assert str(caught.value) == (
        "model 'm' version 1: python model process exited with code 7 while loading model.py"
    )
    backend.unload(context)
    assert _children() == []


def test_initialize_errors_fail_the_load_and_stop_the_process(tmp_path: Path) -> None:
    model_py = """
    class TritonPythonModel:
        def initialize(self, args):
            raise RuntimeError("no camera calibration file")

        def execute(self, requests):
            return []
    """
    context = context_of(write_model(tmp_path, model_py, XY_CONFIG))
    backend = Backend(FAST_RESTARTS)
    backend.complete_config(context)
    with pytest.raises(Unavailable) as caught:
        backend.load_instance(context, InstanceSpec("m_0", "CPU"))
    assert str(caught.value) == (
        "model 'm' version 1: initialize() raised RuntimeError: no camera calibration file "
        "(model.py line 3)"
    )
    backend.unload(context)
    assert _children() == []


# ---------------------------------------------------------------- shutdown


def test_close_runs_finalize_and_reaps_the_process(load, tmp_path: Path) -> None:
    marker = tmp_path / "finalized"
    model_py = f"""
    import os


    class TritonPythonModel:
        def execute(self, requests):
            return []

        def finalize(self):
            with open({str(marker)!r}, "w") as f:
                f.write(str(os.getpid()))
    """
    model = load(model_py)
    pid = model.instance.pid
    model.instance.close()
    assert marker.read_text() == str(pid)
    assert _children() == []


def test_a_finalize_that_hangs_is_killed_after_the_timeout(load) -> None:
    model_py = """
    import time


    class TritonPythonModel:
        def execute(self, requests):
            return []

        def finalize(self):
            time.sleep(600)
    """
    options = IsolationOptions(mode="process", finalize_timeout_s=0.2)
    model = load(model_py, options=options)
    done = threading.Event()
    closer = threading.Thread(target=lambda: (model.instance.close(), done.set()))
    closer.start()
    assert done.wait(15), "close() did not kill the hung finalize"
    closer.join()
    assert _children() == []


def test_a_process_exits_when_the_daemons_end_closes_even_mid_execute(load, tmp_path) -> None:
    entered = tmp_path / "entered"
    model_py = f"""
    import time


    class TritonPythonModel:
        def execute(self, requests):
            open({str(entered)!r}, "w").close()
            time.sleep(600)
    """
    model = load(model_py)
    process = model.instance._process
    caller = threading.Thread(target=model.infer, args=(xy_request(1),), daemon=True)
    caller.start()
    wait_for(entered.exists, what="the model to be inside execute()")
    process._channel._sock.shutdown(socket.SHUT_RDWR)  # what the daemon's exit does to it
    assert process.wait(20) == 0, "killed at the deadline instead of exiting by itself"
    caller.join(20)
    assert not caller.is_alive()


# ---------------------------------------------------------------- choosing the mode


def test_the_daemon_default_isolates_models_that_do_not_choose(tmp_path: Path) -> None:
    backend = BackendCatalog(python_isolation="process", python_memory_limit_mb=512).get("python")
    context = context_of(write_model(tmp_path, CRASHING_MODEL, XY_CONFIG))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("m_0", "CPU"))
    try:
        pid = int(expect_response(instance.execute([xy_request(1)])[0]).output("PID").data[0])
        assert pid != os.getpid()
        assert context.notes == ["runs in its own process (memory limit: 512 MB)"]
    finally:
        instance.close()
        backend.unload(context)


def test_a_model_can_stay_in_process_under_an_isolating_default(tmp_path: Path) -> None:
    config = XY_CONFIG + 'parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "in_process" } }\n'
    backend = Backend(FAST_RESTARTS)
    context = context_of(write_model(tmp_path, CRASHING_MODEL, config))
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("m_0", "CPU"))
    try:
        pid = int(expect_response(instance.execute([xy_request(1)])[0]).output("PID").data[0])
        assert pid == os.getpid()
    finally:
        instance.close()
        backend.unload(context)


def test_an_unknown_isolation_mode_fails_the_load(tmp_path: Path) -> None:
    config = XY_CONFIG + 'parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "proc" } }\n'
    context = context_of(write_model(tmp_path, CRASHING_MODEL, config))
    backend = Backend()
    with pytest.raises(InvalidArgument) as caught:
        backend.complete_config(context)
    assert str(caught.value) == (
        "model 'm' version 1, parameter 'EDGEBOX_ISOLATION': expected 'in_process' or "
        "'process', got 'proc'"
    )
    backend.unload(context)


def test_a_bad_memory_limit_fails_the_load(tmp_path: Path) -> None:
    config = (
        XY_CONFIG
        + 'parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }\n'
        + 'parameters { key: "EDGEBOX_MEMORY_LIMIT_MB" value: { string_value: "lots" } }\n'
    )
    context = context_of(write_model(tmp_path, CRASHING_MODEL, config))
    backend = Backend()
    with pytest.raises(InvalidArgument) as caught:
        backend.complete_config(context)
    assert str(caught.value) == (
        "model 'm' version 1, parameter 'EDGEBOX_MEMORY_LIMIT_MB': expected a whole number "
        "of MB (0: no limit), got 'lots'"
    )


def test_settings_accept_exactly_the_backends_modes() -> None:
    from edgebox.backends.python.isolation import MODES

    assert PYTHON_ISOLATION_MODES == MODES
