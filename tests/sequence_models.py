"""A python sequence model for the e2e and parity tests: ``model.py`` reads
the control inputs (START, END, READY, CORRID), ``request.correlation_id()``
and ``request.flags()``, so an answer shows what the scheduler handed the
backend. OUTPUT = INPUT + START + END * CORRID, as ``simple_dyna_sequence``
answers (a string CORRID counts as its decimal value, else 0); INFO holds
the rest as JSON text. No implicit state: Triton's python
backend has none."""

from __future__ import annotations

from pathlib import Path

from model_fixtures import write_model

SEQUENCE_PY_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 4
sequence_batching {{
  max_sequence_idle_microseconds: 5000000
  oldest {{ max_candidate_sequences: 4 }}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }} ] }}
  ]
}}
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [
  {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

SEQUENCE_PY = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils

OFFSET = {offset}


def _value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _number(text):
    return int(text) if text.isdigit() else 0


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = _value(request, "INPUT")
            start = _value(request, "START")
            end = _value(request, "END")
            corrid = _value(request, "CORRID")
            if corrid.dtype == object:
                corrid = np.vectorize(_text, otypes=[object])(corrid)
                number = np.vectorize(_number, otypes=[np.int64])(corrid)
            else:
                number = corrid.astype(np.int64)
            y = x + start + end * number + OFFSET
            info = json.dumps({{
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "ready": _value(request, "READY").tolist(),
                "corrid": corrid.tolist(),
                "corrid_dtype": str(corrid.dtype),
                "start_shape": list(start.shape),
            }})
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT", y.astype(np.int32)),
                pb_utils.Tensor("INFO", np.array([[info.encode()]], dtype=object)),
            ]))
        return responses
"""


def write_sequence_py(repository: Path, name: str = "sequence_py", offset: int = 0) -> Path:
    """The model in ``<repository>/<name>/1``; ``offset`` is added to every
    OUTPUT, so a second version can be told apart."""
    return write_model(
        repository,
        name,
        SEQUENCE_PY_CONFIG.format(name=name),
        {"1/model.py": SEQUENCE_PY.format(offset=offset)},
    )


def sequence_py_source(offset: int) -> str:
    return SEQUENCE_PY.format(offset=offset)
