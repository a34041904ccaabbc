"""Builders for model repositories used by the tests: write a config and model
files into a folder the way a user would; and add_sub's inputs as tritonclient
builds them."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from scripts.build_demo_repository import build_generated_files
from scripts.onnx_builders import build_add_sub

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_REPOSITORY = REPO_ROOT / "model_repository"

ADD_SUB_CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
  {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
  {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }}
]
"""


PYTHON_BACKEND = 'backend: "python"'
ONE_CPU_INSTANCE = "instance_group [ { kind: KIND_CPU count: 1 } ]"

TensorSpecs = dict[str, tuple[str, list[int]]]
"""Tensor name -> (Triton data type without ``TYPE_``, dims), in config order."""


def _tensors(kind: str, specs: TensorSpecs) -> str:
    entries = [
        f'{{ name: "{name}" data_type: TYPE_{data_type} dims: [ {", ".join(map(str, dims))} ] }}'
        for name, (data_type, dims) in specs.items()
    ]
    if len(entries) == 1:
        return f"{kind} [ {entries[0]} ]"
    return f"{kind} [\n" + ",\n".join(f"  {entry}" for entry in entries) + "\n]"


def model_config(
    name: str,
    runtime: str,
    inputs: TensorSpecs,
    outputs: TensorSpecs,
    max_batch_size: int | None = 0,
    extra: str = "",
) -> str:
    """A config.pbtxt as the tests write them: ``runtime`` is its ``backend``
    or ``platform`` line (``PYTHON_BACKEND``), ``extra`` any fields after the
    tensors; no ``max_batch_size`` line where it is None."""
    lines = [f'name: "{name}"', runtime]
    if max_batch_size is not None:
        lines.append(f"max_batch_size: {max_batch_size}")
    lines += [_tensors("input", inputs), _tensors("output", outputs)]
    if extra:
        lines.append(extra.strip())
    return "\n" + "\n".join(lines) + "\n"


def add_sub_tensors(data_type: str = "FP32") -> tuple[TensorSpecs, TensorSpecs]:
    """add_sub's inputs and outputs (INPUT0, INPUT1 -> OUTPUT0 = sum,
    OUTPUT1 = difference, each [16]) in ``data_type``: Triton's ``simple``."""
    spec = (data_type, [16])
    return {"INPUT0": spec, "INPUT1": spec}, {"OUTPUT0": spec, "OUTPUT1": spec}


def ensemble_config(
    name: str,
    inputs: TensorSpecs,
    outputs: TensorSpecs,
    steps: list[tuple[str, dict[str, str], dict[str, str]]],
    max_batch_size: int = 0,
) -> str:
    """An ensemble's config.pbtxt; each step is (model, {its input: ensemble
    tensor}, {its output: ensemble tensor}), the latest version of the model."""
    blocks = []
    for model, input_map, output_map in steps:
        maps = [f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in input_map.items()]
        maps += [f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in output_map.items()]
        body = "\n".join(
            f"      {line}" for line in [f'model_name: "{model}"', "model_version: -1", *maps]
        )
        blocks.append(f"    {{\n{body}\n    }}")
    scheduling = "ensemble_scheduling {\n  step [\n" + ",\n".join(blocks) + "\n  ]\n}"
    return model_config(
        name, 'platform: "ensemble"', inputs, outputs, max_batch_size, extra=scheduling
    )


def add_sub_json_config(name: str | None = "add_sub", max_batch_size: int = 8) -> dict:
    """``ADD_SUB_CONFIG`` as the JSON a load request's ``config`` parameter
    carries (without ``name`` where ``name`` is None); a new dict each call."""
    tensors = {
        "input": [{"name": f"INPUT{i}", "data_type": "TYPE_FP32", "dims": [16]} for i in (0, 1)],
        "output": [{"name": f"OUTPUT{i}", "data_type": "TYPE_FP32", "dims": [16]} for i in (0, 1)],
    }
    named = {} if name is None else {"name": name}
    return named | {"platform": "onnxruntime_onnx", "max_batch_size": max_batch_size} | tensors


PYTHON_XY_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""
"""A python model taking X and returning Y, both FP32 [2]; fill in ``name``."""

PYTHON_XY_IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""
"""A model.py for ``PYTHON_XY_CONFIG`` that answers Y = X."""


TIMES_TEN_IN_PLACE_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            x *= 10
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
"""
"""OUT = 10 * IN, written into IN's own array, as a model may under Triton
(where each model gets its own copy of its inputs)."""


def write_model(
    repository: Path, name: str, config: str, files: dict[str, str | bytes] | None = None
) -> Path:
    """``files`` maps paths inside the model folder (e.g. ``1/model.py``) to content."""
    model_dir = repository / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config).lstrip())
    for relative, content in (files or {}).items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip())
    return model_dir


def add_python_xy(
    repository: Path, name: str, model_py: str = PYTHON_XY_IDENTITY, config_extra: str = ""
) -> Path:
    """Version 1 of a python model on ``PYTHON_XY_CONFIG`` (with ``config_extra``
    appended) that runs ``model_py``."""
    config = PYTHON_XY_CONFIG.format(name=name) + config_extra
    return write_model(repository, name, config, {"1/model.py": model_py})


def add_add_sub(
    repository: Path,
    name: str = "add_sub",
    versions: tuple[int, ...] = (1,),
    config_extra: str = "",
) -> Path:
    """The ONNX add_sub as ``name`` (``ADD_SUB_CONFIG`` with ``config_extra``
    appended), one built model.onnx per version."""
    model_dir = write_model(repository, name, ADD_SUB_CONFIG.format(name=name) + config_extra)
    for version in versions:
        build_add_sub(model_dir / str(version) / "model.onnx")
    return model_dir


TYPES_CONFIG = """
name: "types"
backend: "python"
max_batch_size: 0
input [
  { name: "F16" data_type: TYPE_FP16 dims: [ -1 ] },
  { name: "I64" data_type: TYPE_INT64 dims: [ 2, 2 ] },
  { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] }
]
output [
  { name: "F16_TWICE" data_type: TYPE_FP16 dims: [ -1 ] },
  { name: "I64_PLUS_ONE" data_type: TYPE_INT64 dims: [ 2, 2 ] },
  { name: "TEXT_UPPER" data_type: TYPE_STRING dims: [ -1 ] }
]
"""

TYPES_MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            f16 = pb_utils.get_input_tensor_by_name(request, "F16").as_numpy()
            i64 = pb_utils.get_input_tensor_by_name(request, "I64").as_numpy()
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([t.upper() for t in text], dtype=object)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("F16_TWICE", (f16 * 2).astype(np.float16)),
                pb_utils.Tensor("I64_PLUS_ONE", i64 + 1),
                pb_utils.Tensor("TEXT_UPPER", upper),
            ]))
        return responses
"""
"""FP16, INT64 and BYTES in and out: twice F16, I64 plus one, TEXT upper-cased."""


def add_types(repository: Path) -> Path:
    return write_model(repository, "types", TYPES_CONFIG, {"1/model.py": TYPES_MODEL_PY})


def add_publishing_add_sub(repository: Path) -> Path:
    """add_sub with ``mqtt_publish: "true"``: the daemon publishes its answers over MQTT."""
    model_dir = add_add_sub(repository)
    config = model_dir / "config.pbtxt"
    config.write_text(
        config.read_text() + 'parameters { key: "mqtt_publish" value { string_value: "true" } }\n'
    )
    return model_dir


def add_sub_infer_inputs(client_module, a, b, binary_data: bool = True) -> list:
    """``a`` and ``b`` (FP32 arrays of one shape) as add_sub's INPUT0 and INPUT1,
    built with ``client_module.InferInput`` (``tritonclient.http`` or ``.grpc``,
    or their aio twins); ``binary_data=False`` sends them as JSON over HTTP."""
    inputs = []
    for name, value in (("INPUT0", a), ("INPUT1", b)):
        tensor = client_module.InferInput(name, list(value.shape), "FP32")
        if binary_data:
            tensor.set_data_from_numpy(value)
        else:
            tensor.set_data_from_numpy(value, binary_data=False)
        inputs.append(tensor)
    return inputs


def copy_demo_repository(target: Path) -> Path:
    """The bundled demo repository, with its ONNX files built (``target`` may
    exist already, empty)."""
    shutil.copytree(
        DEMO_REPOSITORY,
        target,
        ignore=shutil.ignore_patterns("model.onnx", "__pycache__"),
        dirs_exist_ok=True,
    )
    build_generated_files(target)
    return target


DECOUPLED_REPEAT_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }} ]
output [
  {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

DECOUPLED_REPEAT_MODEL = """
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    \"\"\"Answers IN = [a, b, ...] with one response per element (OUT, IDX),
    then the final flag alone. The request parameter 'mode' picks how:
    'inline' (default) from execute, 'thread' from a thread execute starts,
    'final_with_last' with the flag on the last response, 'raise' raises
    from execute, 'hold' never sends the final, 'error' sends an error
    response first, 'twice' tries a second final and reports the exception.\"\"\"

    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            mode = json.loads(request.parameters()).get("mode", "inline")
            sender = request.get_response_sender()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if mode == "raise":
                raise ValueError("no answer today")
            if mode == "report_cancel":
                values = values * 0 + int(sender.is_cancelled())
            if mode == "return":
                return [pb_utils.InferenceResponse([])]
            if mode == "thread":
                thread = threading.Thread(target=self.answer, args=(sender, values, mode))
                thread.start()
                self.threads.append(thread)
            else:
                self.answer(sender, values, mode)
        return None

    def answer(self, sender, values, mode):
        if mode == "error":
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("first one failed")))
        for index, value in enumerate(values):
            response = pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([value], np.int32)),
                pb_utils.Tensor("IDX", np.array([index], np.uint32)),
            ])
            last = mode == "final_with_last" and index == len(values) - 1
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0)
        if mode == "hold":
            return
        if mode != "final_with_last":
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if mode == "twice":
            try:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except pb_utils.TritonModelException as exc:
                pb_utils.Logger.log_error("second final: " + exc.message())

    def finalize(self):
        for thread in self.threads:
            thread.join()
"""
"""A decoupled python model in the shape of python_backend's ``repeat_int32``."""


def add_decoupled_repeat(repository: Path, name: str = "repeat") -> Path:
    return write_model(
        repository,
        name,
        DECOUPLED_REPEAT_CONFIG.format(name=name),
        {"1/model.py": DECOUPLED_REPEAT_MODEL},
    )


def build_tritonclient_repository(repository: Path) -> Path:
    """The demo repository with ``add_sub_v2`` (versions 1 and 2) and ``types``:
    what the tritonclient HTTP and gRPC end-to-end tests serve."""
    copy_demo_repository(repository)
    add_add_sub(repository, "add_sub_v2", versions=(1, 2))
    add_types(repository)
    return repository


def build_streaming_repository(repository: Path) -> Path:
    """The decoupled ``repeat`` beside the ordinary ``add_sub``: what the
    streaming end-to-end tests (gRPC streams, HTTP generate) serve."""
    add_decoupled_repeat(repository)
    add_add_sub(repository)
    return repository
