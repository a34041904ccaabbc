"""The repository both servers of the differential test serve: python models
and an ensemble only, since the reference Triton (PyPI's nvidia-pytriton) has
no ONNX Runtime backend. ``sequence_py`` is a sequence model with every
control (no implicit state: Triton's python backend has none);
``sequence_py_strid`` the same with a TYPE_STRING CORRID, and
``sequence_py_defaults`` without an idle time (for the config answer),
``sequence_py_direct`` with the direct strategy (null requests pad a batch).
``answers_error`` answers a negative input with ``InferenceResponse(error=...)``
and raises for -5, for how each server counts them."""

from __future__ import annotations

import json
from pathlib import Path

from model_fixtures import (
    ONE_CPU_INSTANCE,
    PYTHON_BACKEND,
    add_sub_tensors,
    ensemble_config,
    model_config,
    write_model,
)
from sequence_models import write_sequence_py

ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                        pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32)),
                    ]
                )
            )
        return responses
"""

ADD_SUB_CONFIG = model_config(
    "add_sub_py", PYTHON_BACKEND, *add_sub_tensors(), max_batch_size=8, extra=ONE_CPU_INSTANCE
)

DOUBLE_CONFIG = ensemble_config(
    "double",
    {"IN": ("FP32", [16])},
    {"OUT": ("FP32", [16])},
    [("add_sub_py", {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})],
    max_batch_size=8,
)


ANSWERS_ERROR = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if value[0] == -5:
                raise pb_utils.TritonModelException("raised")
            if value[0] < 0:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative")))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]))
        return responses
"""

ANSWERS_ERROR_CONFIG = model_config(
    "answers_error",
    PYTHON_BACKEND,
    {"IN": ("INT32", [1])},
    {"OUT": ("INT32", [1])},
    extra=ONE_CPU_INSTANCE,
)


ERROR_STEP_CONFIG = ensemble_config(
    "error_step",
    {"IN": ("INT32", [1])},
    {"OUT": ("INT32", [1])},
    [("answers_error", {"IN": "IN"}, {"OUT": "OUT"})],
)
"""An ensemble of ``answers_error`` alone: how a step's error counts on the ensemble."""


def write_parity_repository(root: Path) -> Path:
    write_model(root, "answers_error", ANSWERS_ERROR_CONFIG, {"1/model.py": ANSWERS_ERROR})
    write_model(root, "add_sub_py", ADD_SUB_CONFIG, {"1/model.py": ADD_SUB})
    write_model(root, "double", DOUBLE_CONFIG, {"1/.keep": ""})
    write_model(root, "error_step", ERROR_STEP_CONFIG, {"1/.keep": ""})
    write_sequence_py(root)
    string_id = write_sequence_py(root, "sequence_py_strid")
    config = string_id / "config.pbtxt"
    config.write_text(config.read_text().replace("TYPE_UINT64", "TYPE_STRING"))
    direct = write_sequence_py(root, "sequence_py_direct") / "config.pbtxt"
    direct.write_text(
        direct.read_text().replace("oldest { max_candidate_sequences: 4 }", "direct { }")
    )
    defaults = write_sequence_py(root, "sequence_py_defaults") / "config.pbtxt"
    defaults.write_text(defaults.read_text().replace("max_sequence_idle_microseconds: 5000000", ""))
    return root


_ARANGE = [float(i) for i in range(16)]


def _tensor(name: str, data: list, shape=(1, 16), datatype: str = "FP32") -> dict:
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data}


def _infer_body(*inputs: dict, outputs: list | None = None) -> bytes:
    document: dict = {"inputs": list(inputs)}
    if outputs is not None:
        document["outputs"] = outputs
    return json.dumps(document).encode()


_VALID = (_tensor("INPUT0", _ARANGE), _tensor("INPUT1", _ARANGE))
FAILURE_REQUESTS = {
    "valid": ("add_sub_py", _infer_body(*_VALID)),
    "wrong shape": (
        "add_sub_py",
        _infer_body(_tensor("INPUT0", _ARANGE[:8], (1, 8)), _tensor("INPUT1", _ARANGE[:8], (1, 8))),
    ),
    "wrong datatype": (
        "add_sub_py",
        _infer_body(_tensor("INPUT0", [1] * 16, datatype="INT32"), _tensor("INPUT1", _ARANGE)),
    ),
    "unknown input": ("add_sub_py", _infer_body(_VALID[0], _tensor("INPUT9", _ARANGE))),
    "unknown input besides the right ones": (
        "add_sub_py",
        _infer_body(*_VALID, _tensor("INPUT9", _ARANGE)),
    ),
    "missing input": ("add_sub_py", _infer_body(_VALID[0])),
    "batch over max_batch_size": (
        "add_sub_py",
        _infer_body(
            _tensor("INPUT0", _ARANGE * 9, (9, 16)), _tensor("INPUT1", _ARANGE * 9, (9, 16))
        ),
    ),
    "unknown output": ("add_sub_py", _infer_body(*_VALID, outputs=[{"name": "OUTPUT9"}])),
    "data shorter than the shape": (
        "add_sub_py",
        _infer_body(_tensor("INPUT0", _ARANGE[:15]), _VALID[1]),
    ),
    "malformed JSON": ("add_sub_py", b'{"inputs": ['),
    "ensemble input of the wrong shape": (
        "double",
        _infer_body(_tensor("IN", _ARANGE[:8], (1, 8))),
    ),
    "model answers InferenceResponse(error=...)": (
        "answers_error",
        _infer_body(_tensor("IN", [-1], (1,), "INT32")),
    ),
    "model execute raises": ("answers_error", _infer_body(_tensor("IN", [-5], (1,), "INT32"))),
    "ensemble step answers an error": (
        "error_step",
        _infer_body(_tensor("IN", [-1], (1,), "INT32")),
    ),
}
"""Name (``triton_answers.FAILURE_COUNTS``) -> (model, HTTP infer body): what
counts as a success or a failure, request by request."""
