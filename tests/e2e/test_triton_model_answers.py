"""Triton 2.51's answers (tests/triton_answers.py) about what a python model
returns and which config it runs with: an output whose dtype differs from
the config passes through, ``optimization`` is filled in the config answer,
and a plain load keeps a load's config override while the files are
unchanged. Official-example style: tritonclient against the real daemon."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import triton_answers
from daemon_process import explicit_control, wait_for
from model_fixtures import PYTHON_BACKEND, ensemble_config, model_config, write_model

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.{dtype}))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""

ENSEMBLE = ensemble_config(
    "ens",
    {"IN": ("FP32", [4])},
    {"OUT": ("FP32", [4])},
    [("plain", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})],
)

OVERRIDE = {
    "backend": "python",
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "parameters": {"tag": {"string_value": "override"}},
    "instance_group": [{"kind": "KIND_CPU", "count": 2}],
}


def add_python(repository, name: str, dtype: str, batch: int = 0) -> None:
    write_model(
        repository,
        name,
        model_config(
            name,
            PYTHON_BACKEND,
            {"INPUT0": ("FP32", [4])},
            {"OUTPUT0": ("FP32", [4])},
            max_batch_size=batch,
            extra="instance_group [ { kind: KIND_CPU } ]",
        ),
        {"1/model.py": MODEL.format(dtype=dtype)},
    )


LOADED = [
    *(f"as_{dtype}" for dtype in triton_answers.OUTPUT_DTYPE_PASSTHROUGH),
    "as_float64_batched",
    "ens",
]

pytestmark = pytest.mark.daemon_flags(*explicit_control(*LOADED))


@pytest.fixture(scope="module")
def repository(repository):
    for dtype in triton_answers.OUTPUT_DTYPE_PASSTHROUGH:
        add_python(repository, f"as_{dtype}", dtype)
    add_python(repository, "as_float64_batched", "float64", batch=8)
    add_python(repository, "plain", "float32")
    add_python(repository, "overridden", "float32")
    write_model(repository, "ens", ENSEMBLE)
    (repository / "ens" / "1").mkdir()
    return repository


def http_infer(client, model: str, shape: list[int]):
    data = np.array([1, 2, 3, 4], dtype=np.float32).reshape(shape)
    inputs = [httpclient.InferInput("INPUT0", shape, "FP32")]
    inputs[0].set_data_from_numpy(data, binary_data=False)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)]
    return client.infer(model, inputs, outputs=outputs)


def test_an_output_of_another_dtype_than_the_config_passes_through(daemon):
    with httpclient.InferenceServerClient(daemon.url) as client:
        for dtype, (datatype, data) in triton_answers.OUTPUT_DTYPE_PASSTHROUGH.items():
            answer = http_infer(client, f"as_{dtype}", [4]).get_response()["outputs"][0]
            assert (answer["datatype"], answer["shape"], answer["data"]) == (datatype, [4], data)
        batched = http_infer(client, "as_float64_batched", [1, 4]).as_numpy("OUTPUT0")
        assert batched.dtype == np.float64 and batched.tolist() == [[2.0, 4.0, 6.0, 8.0]]
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        inputs = [grpcclient.InferInput("INPUT0", [4], "FP32")]
        inputs[0].set_data_from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
        answer = client.infer("as_int32", inputs)
        assert answer.get_response().outputs[0].datatype == "INT32"
        assert answer.as_numpy("OUTPUT0").dtype == np.int32
    # Once per model version, not per request (the test above sent two to none).
    http_infer(httpclient.InferenceServerClient(daemon.url), "as_float64", [4])
    log = daemon.log_path.read_text()
    warning = (
        "model 'as_float64' version 1, output 'OUTPUT0': the model returned FP64, "
        "the config says FP32; passed through as FP64"
    )
    assert log.count(warning) == 1


def test_config_answer_fills_optimization_for_python_not_for_an_ensemble(daemon):
    with httpclient.InferenceServerClient(daemon.url) as client:
        assert client.get_model_config("as_int32")["optimization"] == (
            triton_answers.PYTHON_OPTIMIZATION
        )
        assert "optimization" not in client.get_model_config("ens")
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        optimization = client.get_model_config("as_int32").config.optimization
        assert optimization.input_pinned_memory.enable
        assert optimization.output_pinned_memory.enable


def test_a_plain_load_keeps_the_config_override_while_files_are_unchanged(daemon):
    model_py = daemon.repository / "overridden" / "1" / "model.py"
    with httpclient.InferenceServerClient(daemon.url) as client:

        def source() -> str:
            config = client.get_model_config("overridden")
            return "override" if "tag" in config["parameters"] else "files"

        def change_a_file() -> None:
            model_py.write_text(model_py.read_text() + "# changed\n")

        steps = {
            "load": lambda: client.load_model("overridden"),
            "load with config override": lambda: client.load_model(
                "overridden", config=json.dumps(OVERRIDE)
            ),
            "change a file, load": lambda: (change_a_file(), client.load_model("overridden")),
            "unload, load": lambda: (
                client.unload_model("overridden"),
                wait_for(lambda: not client.is_model_ready("overridden"), what="the unload"),
                client.load_model("overridden"),
            ),
        }
        seen = []
        for step, _ in triton_answers.OVERRIDE_KEPT_SCENARIO:
            steps[step]()
            seen.append((step, source()))
        assert seen == triton_answers.OVERRIDE_KEPT_SCENARIO
