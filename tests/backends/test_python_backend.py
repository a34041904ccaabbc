"""The python backend runs Triton ``model.py`` files unchanged, in-process.

Each test writes a model folder under ``tmp_path`` (config.pbtxt plus
``<version>/model.py``), loads it through the backend contract and runs
requests, pinning the messages a user would read.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgebox.backends import BackendCatalog
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.backends.python.instance import PythonInstance
from edgebox.errors import EdgeboxError, ErrorCode, NotFound, Unavailable
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor
from model_fixtures import TIMES_TEN_IN_PLACE_MODEL

ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] }
]
instance_group [ { kind: KIND_CPU } ]
"""

# Written for this suite in the shape of Triton's examples/add_sub/model.py: it
# touches the same pb_utils calls (config by name, type strings, tensors, responses).
ADD_SUB_MODEL = """
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = model_config = json.loads(args["model_config"])
        output0_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT0")
        output1_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT1")
        self.output0_dtype = pb_utils.triton_string_to_numpy(output0_config["data_type"])
        self.output1_dtype = pb_utils.triton_string_to_numpy(output1_config["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            out_0 = in_0.as_numpy() + in_1.as_numpy()
            out_1 = in_0.as_numpy() - in_1.as_numpy()
            out_tensor_0 = pb_utils.Tensor("OUTPUT0", out_0.astype(self.output0_dtype))
            out_tensor_1 = pb_utils.Tensor("OUTPUT1", out_1.astype(self.output1_dtype))
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[out_tensor_0, out_tensor_1])
            )
        return responses

    def finalize(self):
        print("Cleaning up...")
"""

ECHO_CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

BYTES_CONFIG = """
backend: "python"
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [
  { name: "FROM_STR" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "FROM_NP_BYTES" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "FROM_NP_STR" data_type: TYPE_STRING dims: [ -1 ] }
]
"""


class LoadedModel:
    def __init__(self, backend: Backend, context: ModelContext, instance: PythonInstance) -> None:
        self.backend = backend
        self.context = context
        self.instance = instance

    def infer(self, *requests: InferRequest) -> list[InferResponse | EdgeboxError]:
        results = self.instance.execute(list(requests))
        assert len(results) == len(requests)
        return results


def write_model(
    root: Path,
    model_py: str,
    config: str,
    name: str = "m",
    version: int = 1,
    extra_files: dict[str, str] | None = None,
) -> Path:
    model_dir = root / name
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config), encoding="utf-8")
    (version_dir / "model.py").write_text(textwrap.dedent(model_py).lstrip("\n"), encoding="utf-8")
    for filename, text in (extra_files or {}).items():
        (version_dir / filename).write_text(textwrap.dedent(text), encoding="utf-8")
    return model_dir


def make_context(model_dir: Path, version: int = 1, infer=None) -> ModelContext:
    config = read_model_config(model_dir)
    return ModelContext(
        model_dir.name, version, config, model_dir, model_dir / str(version), infer=infer
    )


def line_of(source: str, marker: str) -> int:
    """1-based line of ``marker`` in the model.py that ``write_model`` writes."""
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    return next(number for number, line in enumerate(lines, 1) if marker in line)


@pytest.fixture
def load_model(tmp_path: Path) -> Iterator[Callable[..., LoadedModel]]:
    """Writes, completes and loads a model; closes and unloads it at teardown
    so no test leaves its folder on sys.path."""
    loaded: list[LoadedModel] = []
    contexts: list[tuple[Backend, ModelContext]] = []

    def load(
        model_py: str,
        config: str,
        name: str = "m",
        infer=None,
        extra_files: dict[str, str] | None = None,
        instance: InstanceSpec | None = None,
    ) -> LoadedModel:
        model_dir = write_model(tmp_path, model_py, config, name=name, extra_files=extra_files)
        backend = Backend()
        context = make_context(model_dir, infer=infer)
        contexts.append((backend, context))
        backend.complete_config(context)
        model = LoadedModel(
            backend,
            context,
            backend.load_instance(context, instance or InstanceSpec(f"{name}_0_0", "CPU")),
        )
        loaded.append(model)
        return model

    yield load
    for model in loaded:
        model.instance.close()
    for backend, context in contexts:
        backend.unload(context)


def fp32_request(model: str = "m", **arrays: list[float]) -> InferRequest:
    return InferRequest(
        model,
        inputs=[
            Tensor(name, "FP32", np.asarray(values, dtype=np.float32))
            for name, values in arrays.items()
        ],
        id="req-1",
    )


def expect_error(result: object) -> EdgeboxError:
    assert isinstance(result, EdgeboxError), f"expected an error, got {result!r}"
    return result


def expect_response(result: object) -> InferResponse:
    assert isinstance(result, InferResponse), f"expected a response, got {result!r}"
    return result


# ---------------------------------------------------------------- Triton models unchanged


def test_catalog_creates_the_python_backend() -> None:
    backend = BackendCatalog().get("python")
    assert isinstance(backend, Backend)
    assert backend.name == "python"
    assert importlib.import_module("edgebox.backends.python").Backend is Backend


def test_add_sub_model_runs_unchanged(load_model) -> None:
    model = load_model(ADD_SUB_MODEL, ADD_SUB_CONFIG)
    request = InferRequest(
        "m",
        inputs=[
            Tensor("INPUT0", "FP32", np.array([1.5, 2, 3, 4], dtype=np.float32)),
            Tensor("INPUT1", "FP32", np.array([0.5, 1, 1, 1], dtype=np.float32)),
        ],
        id="req-7",
    )
    (result,) = model.infer(request)
    response = expect_response(result)
    assert (response.model_name, response.model_version, response.id) == ("m", "1", "req-7")
    out0, out1 = response.output("OUTPUT0"), response.output("OUTPUT1")
    assert out0.datatype == "FP32"
    np.testing.assert_array_equal(out0.data, [2, 3, 4, 5])
    assert out1.datatype == "INT32"
    np.testing.assert_array_equal(out1.data, [1, 1, 2, 3])
    assert sys.modules["triton_python_backend_utils"] is pb_utils


def test_only_requested_outputs_are_returned(load_model) -> None:
    model = load_model(ADD_SUB_MODEL, ADD_SUB_CONFIG)
    request = fp32_request(INPUT0=[1, 2, 3, 4], INPUT1=[1, 1, 1, 1])
    request.outputs = [RequestedOutput("OUTPUT1")]
    (result,) = model.infer(request)
    assert [t.name for t in expect_response(result).outputs] == ["OUTPUT1"]


def test_korean_seed_preprocess_model(load_model) -> None:
    config = """
    name: "preprocess"
    backend: "python"
    max_batch_size: 100
    input [ { name: "pre_input" data_type: TYPE_FP32 dims: [ -1, -1, -1 ] } ]
    output [ { name: "pre_output" data_type: TYPE_FP32 dims: [ 3, 256, 256 ] } ]
    instance_group [ { kind: KIND_CPU } ]
    """
    model_py = """
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            config = json.loads(args["model_config"])
            output0_config = pb_utils.get_output_config_by_name(config, "pre_output")
            self.output0_dtype = pb_utils.triton_string_to_numpy(output0_config["data_type"])

        def execute(self, requests):
            responses = []
            for request in requests:
                in_0 = pb_utils.get_input_tensor_by_name(request, "pre_input")
                img = in_0.as_numpy()  # [batch, H, W, 3], 0..255
                chw = np.transpose(img, (0, 3, 1, 2)) / 255.0
                img_out = np.zeros((img.shape[0], 3, 256, 256))
                h, w = min(chw.shape[2], 256), min(chw.shape[3], 256)
                img_out[:, :, :h, :w] = chw[:, :, :h, :w]
                out_tensor_0 = pb_utils.Tensor("pre_output", img_out.astype(self.output0_dtype))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out_tensor_0]))
            return responses
    """
    model = load_model(model_py, config, name="preprocess")
    image = np.full((2, 300, 200, 3), 51.0, dtype=np.float32)
    (result,) = model.infer(InferRequest("preprocess", inputs=[Tensor("pre_input", "FP32", image)]))
    output = expect_response(result).output("pre_output")
    assert output.datatype == "FP32"
    assert output.shape == (2, 3, 256, 256)
    assert output.data[1, 2, 255, 199] == pytest.approx(0.2)
    assert output.data[0, 0, 0, 200] == 0.0


def test_initialize_gets_triton_args_as_strings(load_model, tmp_path: Path) -> None:
    model_py = """
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.args = args

        def execute(self, requests):
            text = np.array([json.dumps(self.args)], dtype=np.object_)
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]) for _ in requests
            ]
    """
    config = """
    backend: "python"
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
    """
    model = load_model(model_py, config, instance=InstanceSpec("m_1_2", "GPU", device_id=3))
    (result,) = model.infer(fp32_request(IN=[1]))
    out = expect_response(result).output("OUT")
    assert out.datatype == "BYTES"
    args = json.loads(out.data[0])
    assert set(args) == {
        "model_config",
        "model_instance_kind",
        "model_instance_name",
        "model_instance_device_id",
        "model_repository",
        "model_version",
        "model_name",
    }
    assert all(isinstance(value, str) for value in args.values())
    assert args["model_instance_kind"] == "GPU"
    assert args["model_instance_name"] == "m_1_2"
    assert args["model_instance_device_id"] == "3"
    assert args["model_repository"] == str(tmp_path / "m")
    assert args["model_version"] == "1"
    assert args["model_name"] == "m"
    config_dict = json.loads(args["model_config"])
    assert config_dict["name"] == "m"
    assert config_dict["backend"] == "python"
    assert config_dict["output"][0]["data_type"] == "TYPE_STRING"
    assert config_dict["input"][0]["dims"] == [-1]


def test_request_wrapper_shares_arrays_and_reports_request_fields(load_model) -> None:
    model_py = """
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                tensor = request.inputs()[0]
                facts = {
                    "name": tensor.name(),
                    "dtype": tensor.triton_dtype(),
                    "shape": tensor.shape(),
                    "cpu": tensor.is_cpu(),
                    "id": request.request_id(),
                    "correlation_id": request.correlation_id(),
                    "flags": request.flags(),
                    "outputs": request.requested_output_names(),
                    "parameters": json.loads(request.parameters()),
                    "model": request.model_name(),
                    "cancelled": request.is_cancelled(),
                }
                facts_tensor = pb_utils.Tensor("FACTS", np.array([json.dumps(facts)], object))
                responses.append(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUT", tensor.as_numpy()), facts_tensor],
                        parameters={"seen": True},
                    )
                )
            return responses
    """
    config = """
    backend: "python"
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [
      { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "FACTS" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    """
    model = load_model(model_py, config)
    data = np.array([1, 2, 3], dtype=np.float32)
    request = InferRequest(
        "m",
        inputs=[Tensor("IN", "FP32", data)],
        id="abc",
        parameters={"sequence_id": 42, "sequence_start": True, "threshold": 0.5},
    )
    (result,) = model.infer(request)
    response = expect_response(result)
    assert response.output("OUT").data is data
    assert response.parameters == {"seen": True}
    facts = json.loads(response.output("FACTS").data[0])
    assert facts == {
        "name": "IN",
        "dtype": 11,
        "shape": [3],
        "cpu": True,
        "id": "abc",
        "correlation_id": 42,
        "flags": pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
        "outputs": ["OUT", "FACTS"],
        "parameters": {"threshold": 0.5},
        "model": "m",
        "cancelled": False,
    }


# ---------------------------------------------------------------- execute failures


RAISING_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            scale = 1 / int(x[0])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * scale)]))
        return responses
"""


def test_execute_raising_fails_every_request_and_names_the_line(load_model, caplog) -> None:
    model = load_model(RAISING_MODEL, ECHO_CONFIG)
    line = line_of(RAISING_MODEL, "1 / int(x[0])")
    with caplog.at_level(logging.ERROR, logger="edgebox.backends.python"):
        results = model.infer(fp32_request(IN=[2]), fp32_request(IN=[0]))
    expected = (
        f"model 'm' version 1: execute() raised ZeroDivisionError: division by zero "
        f"(model.py line {line})"
    )
    for result in results:
        error = expect_error(result)
        assert str(error) == expected
        assert error.code is ErrorCode.INTERNAL
    record = next(r for r in caplog.records if r.name == "edgebox.backends.python")
    assert record.getMessage() == expected
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError

    (again,) = model.infer(fp32_request(IN=[2]))
    np.testing.assert_array_equal(expect_response(again).output("OUT").data, [1.0])


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ("responses[:1]", "execute() returned 1 responses for 2 requests"),
        ("None", "execute() returned NoneType, expected a list of pb_utils.InferenceResponse"),
        (
            "tuple(responses)",
            "execute() returned tuple, expected a list of pb_utils.InferenceResponse",
        ),
        (
            "[responses[0], None]",
            "execute() returned NoneType at index 1, expected a pb_utils.InferenceResponse",
        ),
        (
            "['done', responses[1]]",
            "execute() returned str at index 0, expected a pb_utils.InferenceResponse",
        ),
    ],
)
def test_malformed_execute_results_fail_every_request(load_model, returned, problem) -> None:
    model_py = f"""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = [
                pb_utils.InferenceResponse([request.inputs()[0]]) for request in requests
            ]
            return {returned}
    """
    model = load_model(model_py, ECHO_CONFIG)
    results = model.infer(fp32_request(IN=[1]), fp32_request(IN=[2]))
    for result in results:
        error = expect_error(result)
        assert str(error) == f"model 'm' version 1: {problem}"
        assert error.code is ErrorCode.INTERNAL


@pytest.mark.parametrize(
    ("triton_code", "edgebox_code"),
    [
        ("INVALID_ARG", ErrorCode.INVALID_ARG),
        ("NOT_FOUND", ErrorCode.NOT_FOUND),
        ("UNAVAILABLE", ErrorCode.UNAVAILABLE),
        ("UNSUPPORTED", ErrorCode.UNSUPPORTED),
        ("ALREADY_EXISTS", ErrorCode.ALREADY_EXISTS),
        ("INTERNAL", ErrorCode.INTERNAL),
        ("UNKNOWN", ErrorCode.INTERNAL),
        ("CANCELLED", ErrorCode.CANCELLED),
    ],
)
def test_triton_error_codes_map_to_edgebox_codes(load_model, triton_code, edgebox_code) -> None:
    model_py = """
    import json

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                code = json.loads(request.parameters())["code"]
                code_number = getattr(pb_utils.TritonError, code)
                error = pb_utils.TritonError("IN must be positive", code_number)
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
            return responses
    """
    model = load_model(model_py, ECHO_CONFIG)
    request = fp32_request(IN=[-1])
    request.parameters = {"code": triton_code}
    (result,) = model.infer(request)
    error = expect_error(result)
    assert str(error) == "model 'm' version 1: IN must be positive"
    assert error.code is edgebox_code


def test_triton_error_defaults_to_internal() -> None:
    error = pb_utils.TritonError("boom")
    assert (error.message(), error.code(), str(error)) == (
        "boom",
        pb_utils.TritonError.INTERNAL,
        "boom",
    )


def test_errors_stay_with_their_own_request(load_model) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = request.inputs()[0].as_numpy()
                if x[0] < 0:
                    responses.append(pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("negative", pb_utils.TritonError.INVALID_ARG)))
                elif x[0] == 0:
                    responses.append(pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUT", x.astype(np.complex128))]))
                else:
                    responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
            return responses
    """
    model = load_model(model_py, ECHO_CONFIG)
    negative, complex_out, fine = model.infer(
        fp32_request(IN=[-1]), fp32_request(IN=[0]), fp32_request(IN=[3])
    )
    assert expect_error(negative).code is ErrorCode.INVALID_ARG
    error = expect_error(complex_out)
    assert str(error) == (
        "model 'm' version 1, output 'OUT': numpy dtype complex128 has no KServe v2 datatype"
    )
    assert error.code is ErrorCode.INTERNAL
    np.testing.assert_array_equal(expect_response(fine).output("OUT").data, [3])


# ---------------------------------------------------------------- load failures


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    model_py = """
    class TritonPythonModel:
        pass
    return 1
    """
    model_dir = write_model(tmp_path, model_py, ECHO_CONFIG)
    path = model_dir / "1" / "model.py"
    with pytest.raises(Unavailable) as caught:
        Backend().complete_config(make_context(model_dir))
    assert str(caught.value) == (
        f"model 'm' version 1: cannot import '{path}': "
        "SyntaxError: 'return' outside function (model.py line 3)"
    )
    assert str(path.parent) not in sys.path


def test_import_error_names_the_missing_module(tmp_path: Path) -> None:
    model_py = """
    import json
    import edgebox_test_no_such_package
    """
    model_dir = write_model(tmp_path, model_py, ECHO_CONFIG)
    path = model_dir / "1" / "model.py"
    with pytest.raises(Unavailable) as caught:
        Backend().complete_config(make_context(model_dir))
    assert str(caught.value) == (
        f"model 'm' version 1: cannot import '{path}': ModuleNotFoundError: "
        "No module named 'edgebox_test_no_such_package' (model.py line 2)"
    )


def test_missing_model_class_is_unavailable(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "class Model:\n    pass\n", ECHO_CONFIG)
    path = model_dir / "1" / "model.py"
    with pytest.raises(Unavailable) as caught:
        Backend().complete_config(make_context(model_dir))
    assert str(caught.value) == (
        f"model 'm' version 1: '{path}' defines no class 'TritonPythonModel'"
    )
    assert str(path.parent) not in sys.path


def test_missing_model_file_is_unavailable(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "", ECHO_CONFIG)
    (model_dir / "1" / "model.py").unlink()
    with pytest.raises(
        Unavailable, match=r"^model 'm' version 1: model file '.*model.py' not found$"
    ):
        Backend().complete_config(make_context(model_dir))


def test_initialize_raising_is_unavailable_with_line(tmp_path: Path, caplog) -> None:
    model_py = """
    class TritonPythonModel:
        def initialize(self, args):
            raise FileNotFoundError("weights.bin is missing")

        def execute(self, requests):
            return []
    """
    model_dir = write_model(tmp_path, model_py, ECHO_CONFIG)
    backend = Backend()
    context = make_context(model_dir)
    backend.complete_config(context)
    try:
        with pytest.raises(Unavailable) as caught:
            backend.load_instance(context, InstanceSpec("m_0_0", "CPU"))
    finally:
        backend.unload(context)
    line = line_of(model_py, "raise FileNotFoundError")
    assert str(caught.value) == (
        "model 'm' version 1: initialize() raised FileNotFoundError: weights.bin is missing "
        f"(model.py line {line})"
    )


# ---------------------------------------------------------------- auto-complete


AUTO_COMPLETE_MODEL = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config
        config.set_max_batch_size(8)
        config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [3]})
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]})
        config.set_dynamic_batching()
        return config

    def initialize(self, args):
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        batch = str(self.config["max_batch_size"])
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([batch], object))])
            for _ in requests
        ]
"""


def test_auto_complete_fills_inputs_outputs_and_batching(load_model) -> None:
    model = load_model(AUTO_COMPLETE_MODEL, 'backend: "python"\n')
    config = model.context.config
    assert config.max_batch_size == 8
    assert [(t.name, list(t.dims)) for t in config.input] == [("IN", [3])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("OUT", [3])]
    assert config.input[0].data_type == config.output[0].data_type == 11  # TYPE_FP32
    assert config.HasField("dynamic_batching")
    assert config.name == "m"
    assert config.instance_group[0].name == "m_0"
    (result,) = model.infer(fp32_request(IN=[[1, 2, 3]]))
    assert expect_response(result).output("OUT").data[0] == b"8"


def test_auto_complete_keeps_what_the_config_already_says(load_model) -> None:
    config = """
    backend: "python"
    max_batch_size: 8
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
    """
    model = load_model(AUTO_COMPLETE_MODEL, config)
    assert [t.name for t in model.context.config.input] == ["IN"]
    assert [t.name for t in model.context.config.output] == ["OUT"]


def test_auto_complete_contradicting_the_config_is_unavailable(tmp_path: Path) -> None:
    config = """
    backend: "python"
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 3 ] } ]
    """
    model_dir = write_model(tmp_path, AUTO_COMPLETE_MODEL, config)
    with pytest.raises(Unavailable) as caught:
        Backend().complete_config(make_context(model_dir))
    line = line_of(AUTO_COMPLETE_MODEL, "add_input(")
    assert str(caught.value) == (
        "model 'm' version 1: auto_complete_config() raised ValueError: model 'm', input 'IN': "
        "configuration expects datatype TYPE_INT32, model provides TYPE_FP32 "
        f"(model.py line {line})"
    )
    assert str(model_dir / "1") not in sys.path


def test_auto_complete_must_return_the_config(tmp_path: Path) -> None:
    model_py = """
    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.set_max_batch_size(4)

        def execute(self, requests):
            return []
    """
    model_dir = write_model(tmp_path, model_py, ECHO_CONFIG)
    with pytest.raises(Unavailable) as caught:
        Backend().complete_config(make_context(model_dir))
    assert str(caught.value) == (
        "model 'm' version 1: auto_complete_config() returned NoneType, expected the "
        "pb_utils.ModelConfig it was given"
    )


def test_model_config_wrapper_follows_triton_rules() -> None:
    config = pb_utils.ModelConfig(
        {
            "name": "m",
            "max_batch_size": 4,
            "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [2]}],
        }
    )
    assert config.max_batch_size() == 4
    with pytest.raises(ValueError, match="configuration specified max_batch_size 4"):
        config.set_max_batch_size(2)
    with pytest.raises(
        ValueError, match=r"the model expects dims \[3\] but the configuration specifies dims \[2\]"
    ):
        config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [3]})
    with pytest.raises(ValueError, match=r"unknown properties \['format'\]"):
        config.add_output({"name": "B", "data_type": "TYPE_FP32", "dims": [1], "format": "x"})
    config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2], "optional": True})
    assert config.as_dict()["input"] == [
        {"name": "A", "data_type": "TYPE_FP32", "dims": [2], "optional": True}
    ]
    config.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="already sets it to False"):
        config.set_model_transaction_policy({"decoupled": True})
    sequence = pb_utils.ModelConfig({"name": "s", "sequence_batching": {}})
    with pytest.raises(ValueError, match="'sequence_batching'"):
        sequence.set_dynamic_batching()


def test_response_sender_is_refused() -> None:
    request = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="decoupled models"):
        request.get_response_sender()


# ---------------------------------------------------------------- sibling modules and unload


HELPER_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils
from helper import SCALE


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * np.float32(SCALE))]
            )
            for r in requests
        ]
"""


def test_sibling_modules_import_and_stay_apart_between_models(load_model) -> None:
    first = load_model(
        HELPER_MODEL, ECHO_CONFIG, name="first", extra_files={"helper.py": "SCALE = 2\n"}
    )
    second = load_model(
        HELPER_MODEL, ECHO_CONFIG, name="second", extra_files={"helper.py": "SCALE = 5\n"}
    )
    (one,) = first.infer(fp32_request("first", IN=[1]))
    (two,) = second.infer(fp32_request("second", IN=[1]))
    np.testing.assert_array_equal(expect_response(one).output("OUT").data, [2])
    np.testing.assert_array_equal(expect_response(two).output("OUT").data, [5])


def test_import_writes_no_bytecode_into_the_repository(load_model, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    model = load_model(HELPER_MODEL, ECHO_CONFIG, extra_files={"helper.py": "SCALE = 2\n"})
    assert sorted(p.name for p in model.context.version_dir.iterdir()) == ["helper.py", "model.py"]
    assert sys.dont_write_bytecode is False


def test_unload_removes_module_and_folder(tmp_path: Path) -> None:
    model_dir = write_model(
        tmp_path, HELPER_MODEL, ECHO_CONFIG, extra_files={"helper.py": "SCALE = 2\n"}
    )
    backend = Backend()
    context = make_context(model_dir)
    before = set(sys.modules)
    backend.complete_config(context)
    assert sys.path[0] == str(model_dir / "1")
    added = set(sys.modules) - before
    assert any(name.startswith("edgebox_model_m_v1_") for name in added)
    assert "helper" not in added
    backend.load_instance(context, InstanceSpec("m_0_0", "CPU")).close()
    backend.unload(context)
    assert str(model_dir / "1") not in sys.path
    assert not any(name.startswith("edgebox_model_m_v1_") for name in sys.modules)


# ---------------------------------------------------------------- BYTES


def test_bytes_inputs_and_outputs(load_model) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
                assert text.dtype == np.object_ and type(text[0]) is bytes
                upper = [item.decode("utf-8").upper() for item in text]
                encoded = [u.encode("utf-8") for u in upper]
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("FROM_STR", np.array(upper, dtype=np.object_)),
                    pb_utils.Tensor("FROM_NP_BYTES", np.array(encoded, dtype=np.bytes_)),
                    pb_utils.Tensor("FROM_NP_STR", np.array(upper, dtype=np.str_)),
                ]))
            return responses
    """
    model = load_model(model_py, BYTES_CONFIG)
    text = np.array([b"hello", "안녕".encode()], dtype=np.object_)
    (result,) = model.infer(InferRequest("m", inputs=[Tensor("TEXT", "BYTES", text)]))
    response = expect_response(result)
    for name in ("FROM_STR", "FROM_NP_BYTES", "FROM_NP_STR"):
        output = response.output(name)
        assert output.datatype == "BYTES", name
        assert output.data.dtype == np.object_, name
        assert output.data.tolist() == [b"HELLO", "안녕".encode()], name
        assert all(type(item) is bytes for item in output.data), name


def test_byte_tensor_serialization_round_trips() -> None:
    array = np.array([[b"a", b""], [b"\x00bc", "é".encode()]], dtype=np.object_)
    encoded = pb_utils.serialize_byte_tensor(array)
    assert encoded[:5] == b"\x01\x00\x00\x00a"
    decoded = pb_utils.deserialize_bytes_tensor(encoded)
    assert decoded.tolist() == [b"a", b"", b"\x00bc", "é".encode()]
    assert pb_utils.serialize_byte_tensor(np.zeros(2, dtype=np.float32)) is None
    with pytest.raises(ValueError, match="truncated"):
        pb_utils.deserialize_bytes_tensor(b"\x05\x00\x00\x00ab")


def test_type_helpers_match_triton_numbers() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb_utils.triton_to_numpy_type(1) is np.bool_
    assert pb_utils.triton_to_numpy_type(13) is np.object_
    assert pb_utils.numpy_to_triton_type(np.float16) == 10
    assert pb_utils.numpy_to_triton_type(np.dtype(np.int64)) == 9
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.numpy_to_triton_type(np.complex64) is None
    assert pb_utils.Tensor("b", np.array([True])).triton_dtype() == 1
    assert pb_utils.Tensor("s", np.array(["x"])).triton_dtype() == 13
    config = {"input": [{"name": "A"}], "output": [{"name": "B"}]}
    assert pb_utils.get_input_config_by_name(config, "A") == {"name": "A"}
    assert pb_utils.get_output_config_by_name(config, "A") is None
    assert pb_utils.using_decoupled_model_transaction_policy(
        {"model_transaction_policy": {"decoupled": True}}
    )
    assert not pb_utils.using_decoupled_model_transaction_policy({})
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2


# ---------------------------------------------------------------- BLS


BLS_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            bls = pb_utils.InferenceRequest(
                model_name="doubler",
                inputs=[pb_utils.Tensor("X", x.as_numpy())],
                requested_output_names=["Y"],
                model_version=2,
            )
            bls_response = bls.exec()
            if bls_response.has_error():
                responses.append(pb_utils.InferenceResponse(error=bls_response.error()))
                continue
            y = pb_utils.get_output_tensor_by_name(bls_response, "Y")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y.as_numpy())]))
        return responses
"""


def test_bls_exec_goes_through_the_infer_function(load_model) -> None:
    seen: list[InferRequest] = []

    def fake_infer_doubling(request: InferRequest) -> InferResponse:
        seen.append(request)
        x = request.input("X").data
        return InferResponse(
            request.model_name, "2", outputs=[Tensor("Y", "FP32", x * 2)], id=request.id
        )

    model = load_model(BLS_MODEL, ECHO_CONFIG, infer=fake_infer_doubling)
    (result,) = model.infer(fp32_request(IN=[1.5, 2]))
    np.testing.assert_array_equal(expect_response(result).output("OUT").data, [3, 4])
    (bls_request,) = seen
    assert bls_request.model_name == "doubler"
    assert bls_request.model_version == "2"
    assert [o.name for o in bls_request.outputs] == ["Y"]
    assert [(t.name, t.datatype) for t in bls_request.inputs] == [("X", "FP32")]


def test_bls_failure_becomes_a_response_error(load_model) -> None:
    def fake_infer_missing_model(request: InferRequest) -> InferResponse:
        raise NotFound(f"model '{request.model_name}' is not loaded")

    model = load_model(BLS_MODEL, ECHO_CONFIG, infer=fake_infer_missing_model)
    (result,) = model.infer(fp32_request(IN=[1]))
    error = expect_error(result)
    assert str(error) == "model 'm' version 1: model 'doubler' is not loaded"
    assert error.code is ErrorCode.NOT_FOUND


def test_bls_without_infer_function_is_unavailable(load_model, monkeypatch) -> None:
    monkeypatch.setattr(pb_utils, "_infer_function", None)
    model = load_model(BLS_MODEL, ECHO_CONFIG)
    (result,) = model.infer(fp32_request(IN=[1]))
    error = expect_error(result)
    assert error.code is ErrorCode.UNAVAILABLE
    assert str(error) == (
        "model 'm' version 1: BLS request to model 'doubler': no inference function was "
        "given to the python backend, so other models cannot be called"
    )


# ---------------------------------------------------------------- finalize and logging


def test_finalize_runs_on_close_and_its_errors_are_logged(load_model, caplog) -> None:
    model_py = """
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.name = args["model_instance_name"]

        def execute(self, requests):
            return []

        def finalize(self):
            pb_utils.Logger.log_info(f"finalize {self.name}")
            raise RuntimeError("cleanup failed")
    """
    model = load_model(model_py, ECHO_CONFIG)
    with caplog.at_level(logging.INFO):
        model.instance.close()
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    line = line_of(model_py, 'raise RuntimeError("cleanup failed")')
    assert ("edgebox.model", "finalize m_0_0") in messages
    assert (
        "edgebox.backends.python",
        "model 'm' version 1: finalize() raised RuntimeError: cleanup failed "
        f"(model.py line {line})",
    ) in messages


def test_logger_levels_reach_python_logging(caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="edgebox.model"):
        pb_utils.Logger.log_info("i")
        pb_utils.Logger.log_warn("w")
        pb_utils.Logger.log_error("e")
        pb_utils.Logger.log_verbose("v")
        pb_utils.Logger.log("x", pb_utils.LogLevel.ERROR)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "i"),
        (logging.WARNING, "w"),
        (logging.ERROR, "e"),
        (logging.DEBUG, "v"),
        (logging.ERROR, "x"),
    ]


# ---------------------------------------------------------------- who owns a tensor

# Each call scribbles over whatever the previous call kept, then keeps (by
# ``{keep}``) part of what it returns: legal under Triton, which copies outputs
# out of the model's process before the model runs again.
KEEPING_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


def scribble(thing):
    if isinstance(thing, pb_utils.InferenceResponse):
        thing = thing.output_tensors()
    if isinstance(thing, list):
        for item in thing:
            scribble(item)
        return
    if isinstance(thing, pb_utils.Tensor):
        thing = thing.as_numpy()
    np.asarray(thing)[...] = -1


class TritonPythonModel:
    def initialize(self, args):
        self.kept = []
        self.buffer = np.zeros(4, np.float32)

    def execute(self, requests):
        scribble(self.kept)
        self.kept = []
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            out = x * 2
            tensor = pb_utils.Tensor("OUT", out)
            response = pb_utils.InferenceResponse([tensor])
            {keep}
            responses.append(response)
        return responses
"""


@pytest.mark.parametrize(
    "keep",
    [
        "self.kept.append(out)",
        "self.kept.append(out[1:])",
        "self.kept.append(memoryview(out))",
        "self.kept.append(tensor)",
        "self.kept.append(response)",
        "self.kept.append(response.output_tensors())",
        "self.kept = responses",
        "self.buffer[:] = out; tensor = pb_utils.Tensor('OUT', self.buffer); "
        "response = pb_utils.InferenceResponse([tensor])",
        "self.buffer[:] = out; tensor = pb_utils.Tensor('OUT', self.buffer[:]); "
        "response = pb_utils.InferenceResponse([tensor])",
    ],
    ids=[
        "array",
        "view",
        "memoryview",
        "tensor",
        "response",
        "output-list",
        "response-list",
        "buffer",
        "buffer-view",
    ],
)
def test_an_output_the_model_keeps_is_not_changed_by_its_next_call(load_model, keep) -> None:
    model = load_model(KEEPING_MODEL.replace("{keep}", keep), ECHO_CONFIG)
    (first,) = model.infer(fp32_request(IN=[1, 2, 3, 4]))
    (second,) = model.infer(fp32_request(IN=[5, 6, 7, 8]))
    np.testing.assert_array_equal(expect_response(first).output("OUT").data, [2, 4, 6, 8])
    np.testing.assert_array_equal(expect_response(second).output("OUT").data, [10, 12, 14, 16])


def test_fresh_outputs_and_the_requests_own_inputs_are_not_copied(load_model) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                fresh = x * 2
                tail = (x * 3)[1:]
                address = {"fresh": fresh.ctypes.data, "tail": tail.ctypes.data}
                responses.append(pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("FRESH", fresh),
                        pb_utils.Tensor("TAIL", tail),
                        pb_utils.Tensor("SAME", x[::-1]),
                    ],
                    parameters=address,
                ))
            return responses
    """
    config = """
    backend: "python"
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [
      { name: "FRESH" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "TAIL" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "SAME" data_type: TYPE_FP32 dims: [ -1 ] }
    ]
    """
    model = load_model(model_py, config)
    data = np.array([1, 2, 3], np.float32)
    (result,) = model.infer(InferRequest("m", inputs=[Tensor("IN", "FP32", data)]))
    response = expect_response(result)
    assert response.output("FRESH").data.ctypes.data == response.parameters["fresh"]
    assert response.output("TAIL").data.ctypes.data == response.parameters["tail"]
    assert response.output("SAME").data.base is data
    np.testing.assert_array_equal(response.output("TAIL").data, [6, 9])


def test_a_model_writing_into_a_shared_input_writes_into_its_own_copy(load_model) -> None:
    model = load_model(TIMES_TEN_IN_PLACE_MODEL, ECHO_CONFIG)
    shared = np.array([1, 2, 3], np.float32)
    read_only = shared.view()
    read_only.flags.writeable = False
    (result,) = model.infer(InferRequest("m", inputs=[Tensor("IN", "FP32", read_only)]))
    np.testing.assert_array_equal(expect_response(result).output("OUT").data, [10, 20, 30])
    np.testing.assert_array_equal(shared, [1, 2, 3])


def test_a_model_writing_into_its_own_input_is_not_given_a_copy(load_model) -> None:
    model = load_model(TIMES_TEN_IN_PLACE_MODEL, ECHO_CONFIG)
    owned = np.array([1, 2, 3], np.float32)
    (result,) = model.infer(InferRequest("m", inputs=[Tensor("IN", "FP32", owned)]))
    assert expect_response(result).output("OUT").data is owned
    np.testing.assert_array_equal(owned, [10, 20, 30])


def test_bls_hands_the_callee_read_only_inputs(load_model) -> None:
    seen: list[np.ndarray] = []

    def fake_infer_doubling(request: InferRequest) -> InferResponse:
        x = request.input("X").data
        seen.append(x)
        return InferResponse(request.model_name, "2", outputs=[Tensor("Y", "FP32", x * 2)])

    model = load_model(BLS_MODEL, ECHO_CONFIG, infer=fake_infer_doubling)
    (result,) = model.infer(fp32_request(IN=[1.5, 2]))
    np.testing.assert_array_equal(expect_response(result).output("OUT").data, [3, 4])
    assert seen[0].flags.writeable is False


# ---------------------------------------------------------------- BaseException and cancellation


@pytest.mark.parametrize(
    ("raised", "name"),
    [
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("SystemExit", "SystemExit"),
        ("asyncio.CancelledError", "CancelledError"),
        ("GeneratorExit", "GeneratorExit"),
    ],
)
def test_base_exceptions_from_execute_fail_the_requests_like_any_other(
    load_model, raised, name
) -> None:
    model_py = f"""
    import asyncio

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            x = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()
            if x[0] < 0:
                raise {raised}("stop")
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]) for _ in requests]
    """
    model = load_model(model_py, ECHO_CONFIG)
    line = line_of(model_py, f"raise {raised}")
    results = model.infer(fp32_request(IN=[-1]), fp32_request(IN=[2]))
    for result in results:
        error = expect_error(result)
        assert (
            str(error)
            == f"model 'm' version 1: execute() raised {name}: stop (model.py line {line})"
        )
        assert error.code is ErrorCode.INTERNAL
    (again,) = model.infer(fp32_request(IN=[2]))
    np.testing.assert_array_equal(expect_response(again).output("OUT").data, [2])


def test_keyboard_interrupt_from_initialize_fails_the_load(tmp_path: Path) -> None:
    model_py = """
    class TritonPythonModel:
        def initialize(self, args):
            raise KeyboardInterrupt("not now")

        def execute(self, requests):
            return []
    """
    model_dir = write_model(tmp_path, model_py, ECHO_CONFIG)
    backend = Backend()
    context = make_context(model_dir)
    backend.complete_config(context)
    with pytest.raises(Unavailable) as raised:
        backend.load_instance(context, InstanceSpec("m_0_0", "CPU"))
    backend.unload(context)
    assert str(raised.value) == (
        "model 'm' version 1: initialize() raised KeyboardInterrupt: not now (model.py line 3)"
    )


def test_request_is_cancelled_follows_the_client(load_model) -> None:
    model_py = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            return [
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([float(r.is_cancelled())], np.float32))]
                )
                for r in requests
            ]
    """
    model = load_model(model_py, ECHO_CONFIG)
    waiting = fp32_request(IN=[1])
    waiting.is_cancelled = lambda: False
    gone = fp32_request(IN=[1])
    gone.is_cancelled = lambda: True
    results = model.infer(fp32_request(IN=[1]), waiting, gone)
    assert [expect_response(r).output("OUT").data[0] for r in results] == [0, 0, 1]
