"""Models for rollout tests: versions of a python add_sub (the right answer,
a wrong one, a slow one, failing ones and ones that kill the process, each a
model.py body), a python model whose rollouts never finish on test traffic,
and a helper that copies a version into a model folder the way an operator
does (a hidden folder renamed into place, so no poll sees half)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from model_fixtures import (
    PYTHON_BACKEND,
    PYTHON_XY_IDENTITY,
    add_python_xy,
    add_sub_tensors,
    model_config,
    write_model,
)

MODEL_PY = """
import itertools
import time

import numpy as np
import triton_python_backend_utils as pb_utils

_calls = itertools.count()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            call = next(_calls)
{body}
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", out0.astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", out1.astype(np.float32)),
            ]))
        return responses
"""

RIGHT = "out0, out1 = a + b, a - b"
SWAPPED = "out0, out1 = a - b, a + b"
SLOW = "time.sleep(0.02)\nout0, out1 = a + b, a - b"
FAILING = "raise RuntimeError('this version is broken')"
SEGFAULT = "import ctypes\nctypes.string_at(0)\nout0, out1 = a + b, a - b"
EXITS = "import os\nos._exit(3)\nout0, out1 = a + b, a - b"


def fails_after(calls: int) -> str:
    """Right for its first ``calls`` executions, then failing."""
    return (
        f"if call >= {calls}:\n    raise RuntimeError('broke after {calls} calls')\n"
        "out0, out1 = a + b, a - b"
    )


def model_py(body: str) -> str:
    indented = "\n".join("            " + line for line in body.splitlines())
    return MODEL_PY.format(body=indented)


def rollout_parameters(**values: object) -> str:
    """``rollout="shadow", samples=10`` -> the config's parameters; the
    policy is ``rollout``, every other key ``rollout_<key>``."""
    lines = []
    for key, value in values.items():
        name = "rollout" if key == "rollout" else f"rollout_{key}"
        lines.append(f'parameters {{ key: "{name}" value {{ string_value: "{value}" }} }}')
    return "\n".join(lines)


def add_sub_py(repository: Path, name: str = "add_sub", body: str = RIGHT, **rollout) -> Path:
    """Version 1 of the python add_sub with these rollout parameters."""
    inputs, outputs = add_sub_tensors()
    config = model_config(
        name, PYTHON_BACKEND, inputs, outputs, extra=rollout_parameters(**rollout)
    )
    return write_model(repository, name, config, {"1/model.py": model_py(body)})


def publish_version(model_dir: Path, version: int, model_py: str = PYTHON_XY_IDENTITY) -> Path:
    """Copy a new version in as an operator would: built in a hidden folder,
    then renamed into place in one step."""
    hidden = model_dir / f".incoming-{version}"
    hidden.mkdir()
    (hidden / "model.py").write_text(model_py)
    target = model_dir / str(version)
    os.rename(hidden, target)
    return target


def drop_version(model_dir: Path, version: int, body: str) -> Path:
    """A new add_sub version running ``body``, copied in as an operator would."""
    return publish_version(model_dir, version, model_py(body))


LONG_SHADOW_ROLLOUT = """
parameters { key: "rollout" value { string_value: "shadow" } }
parameters { key: "rollout_samples" value { string_value: "100000" } }
"""
"""Config parameters for a shadow rollout no test traffic can finish."""


def add_shadow_model(repository: Path, name: str) -> Path:
    """Version 1 of a python model (Y = X) whose next versions roll out in
    shadow; version 1 serves at once, nothing serving before it."""
    return add_python_xy(repository, name, config_extra=LONG_SHADOW_ROLLOUT)


def add_sub_inputs() -> tuple[np.ndarray, np.ndarray]:
    return np.arange(16, dtype=np.float32), np.full(16, 2.0, dtype=np.float32)
