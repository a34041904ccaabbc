"""Python models under ``sequence_batching``, in process and isolated: the
control and state inputs the scheduler adds (config.input does not list them)
reach ``pb_utils.get_input_tensor_by_name``, and a state output the request
asks for by name (config.output does not list it) comes back.

The control and state tensors are built here by hand, as the sequence batcher
builds them, so no scheduler runs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python.isolated import IsolatedInstance
from edgebox.backends.python.isolation import IsolationOptions
from edgebox.backends.sequence_io import state_outputs
from edgebox.backoff import Backoff
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor

ACCUMULATOR_CONFIG = """
backend: "python"
max_batch_size: 8
sequence_batching {
  direct { }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
  state [
    { input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32 dims: [ 1 ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

ACCUMULATOR_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()
            state = pb_utils.get_input_tensor_by_name(request, "INPUT_STATE").as_numpy()
            total = np.where(start == 1, value, value + state)
            total = np.where(ready == 1, total, state).astype(np.int32)
            outputs = [pb_utils.Tensor("OUTPUT", total)]
            if "OUTPUT_STATE" in request.requested_output_names():
                outputs.append(pb_utils.Tensor("OUTPUT_STATE", total))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
"""

MODES = {
    "in_process": IsolationOptions(),
    "process": IsolationOptions(
        mode="process", restart_backoff=Backoff(initial_s=0.05, max_s=0.2), finalize_timeout_s=2.0
    ),
}


@pytest.fixture(params=sorted(MODES))
def accumulator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable]:
    """The accumulator loaded in one isolation mode; ``step`` runs one request."""
    model_dir = tmp_path / "accumulator"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(ACCUMULATOR_CONFIG))
    (model_dir / "1" / "model.py").write_text(textwrap.dedent(ACCUMULATOR_MODEL).lstrip())
    config = read_model_config(model_dir)
    context = ModelContext("accumulator", 1, config, model_dir, model_dir / "1")
    backend = Backend(MODES[request.param])
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("accumulator_0", "CPU"))
    assert isinstance(instance, IsolatedInstance) == (request.param == "process")

    def step(value: int, start: int, state: int, outputs: list[str]) -> InferResponse:
        def column(number: int) -> np.ndarray:
            return np.array([[number]], dtype=np.int32)

        inputs = [
            Tensor("INPUT", "INT32", column(value)),
            Tensor("START", "INT32", column(start)),
            Tensor("READY", "INT32", column(1)),
            Tensor("INPUT_STATE", "INT32", column(state)),
        ]
        wanted = [RequestedOutput(name) for name in outputs]
        [response] = instance.execute([InferRequest("accumulator", inputs, outputs=wanted)])
        assert isinstance(response, InferResponse), response
        return response

    step.context = context
    yield step
    instance.close()
    backend.unload(context)


def test_control_and_state_inputs_reach_the_model_and_the_state_output_comes_back(
    accumulator,
) -> None:
    first = accumulator(5, 1, 99, ["OUTPUT", "OUTPUT_STATE"])
    second = accumulator(3, 0, int(first.output("OUTPUT_STATE").data[0, 0]), ["OUTPUT_STATE"])

    assert [(t.name, t.datatype, t.data.tolist()) for t in first.outputs] == [
        ("OUTPUT", "INT32", [[5]]),
        ("OUTPUT_STATE", "INT32", [[5]]),
    ]
    assert [(t.name, t.data.tolist()) for t in second.outputs] == [("OUTPUT_STATE", [[8]])]


def test_sequence_tensors_stay_out_of_the_completed_config(accumulator) -> None:
    config = accumulator.context.config
    assert [t.name for t in config.input] == ["INPUT"]
    assert [t.name for t in config.output] == ["OUTPUT"]
    assert [t.name for t in state_outputs(config)] == ["OUTPUT_STATE"]
