"""What a real Triton 2.51 answered, pinned once for the tests that compare
edgebox with it over HTTP and gRPC."""

from __future__ import annotations

LOG_DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}
"""``GET /v2/logging`` on a fresh server."""

TRACE_DEFAULTS = {
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_file": "",
    "trace_mode": "triton",
}
"""``GET /v2/trace/setting`` on a fresh server."""

UNLOAD_SCENARIOS = [
    (["load ens1"], {"a", "b", "ens1"}),
    (["load ens1", "unload ens1"], {"a", "b"}),
    (["load ens1", "unload ens1 dependents"], set()),
    (["load ens1", "load ens2", "unload ens1 dependents"], {"a", "ens2"}),
    (["load a", "load ens1", "unload ens1 dependents"], {"a"}),
    (["load ens1", "unload a"], {"b"}),
]
"""Explicit model control on a repository of python models ``a`` and ``b``
and ensembles ``ens1`` (a then b) and ``ens2`` (a alone), each scenario from
a fresh start: the models READY in ``POST /v2/repository/index`` afterwards.
Loading an ensemble loads its steps; ``unload_dependents`` unloads the steps
nothing else uses and nobody loaded by name; unloading a step unloads the
ensembles that use it."""

UNKNOWN_MODEL_HTTP = {
    "metadata": (404, "Request for unknown model: 'nosuch' is not found"),
    "config": (404, "Request for unknown model: 'nosuch' is not found"),
    "infer": (404, "Request for unknown model: 'nosuch' is not found"),
    "ready": (400, "Model version not ready"),
    "stats": (400, "requested model 'nosuch' is not available"),
}
"""Each model endpoint of a name the server does not know, over HTTP: status
and ``error`` text. Infer answers before reading the body (garbage gets the
same 404). gRPC: NOT_FOUND with the same text for metadata, config and infer,
INVALID_ARGUMENT for statistics, and ``ready: false`` (no error) for ready."""

UNKNOWN_VERSION = "Request for unknown model: 'multiply' version 3 is not found"
"""Metadata, config or infer of a version the model does not have: 404 (gRPC
NOT_FOUND); its statistics: 400 ``requested model version is not available for
model 'multiply'``."""

NO_AVAILABLE_VERSION = "Request for unknown model: 'broken' has no available versions"
"""Metadata, config or infer (no version asked) of a model whose load failed,
or that was unloaded: 404 (gRPC NOT_FOUND); statistics 400 ``requested model
'broken' is not available``."""

VERSION_NOT_READY = "Request for unknown model: 'broken' version 1 is not at ready state"
"""Metadata, config or infer of that model's version 1 (failed or unloaded):
503 (gRPC UNAVAILABLE)."""

LOAD_ANSWERS = {
    "unknown name": (500, "failed to load 'nosuch', failed to poll from model repository"),
    "unparsable config.pbtxt": (
        500,
        "failed to load 'badpb', failed to poll from model repository",
    ),
    "malformed parameters.config": (
        500,
        "failed to load 'multiply', failed to poll from model repository",
    ),
    "initialize raises": (
        400,
        "load failed for model 'broken': version 1 is at UNAVAILABLE state: Internal: "
        "RuntimeError: boom\n\nAt:\n  /tmp/h13/repo/broken/1/model.py(3): initialize\n;\n",
    ),
    "no version folder": (
        400,
        "load failed for model 'noversion': at least one version must be available under "
        "the version policy of model 'noversion'\n",
    ),
}
"""``POST /v2/repository/models/NAME/load`` answers (gRPC: INTERNAL for the
500s, INVALID_ARGUMENT for the 400s, same texts). Every malformed override
(not JSON, unknown field, wrong type, another name, empty) gives the same
poll text; the reason is only in Triton's log (``Invalid config override:
...``). ``unload`` of a name that is not loaded, or not in the repository at
all: 200 with an empty body (gRPC OK)."""

SERVER_NAME = "triton"
"""``GET /v2`` / gRPC ServerMetadata ``name``."""

CONFIGLESS_PYTHON_MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input(
            {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        )
        auto_complete_model_config.add_output(
            {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        )
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
        return responses
"""
"""``autopy/1/model.py``, alone in its folder (no ``config.pbtxt``)."""

CONFIGLESS_PYTHON_CONFIG = {
    "name": "autopy",
    "platform": "",
    "backend": "python",
    "version_policy": {"latest": {"num_versions": 1}},
    "max_batch_size": 0,
    "input": [
        {
            "name": "INPUT0",
            "data_type": "TYPE_FP32",
            "format": "FORMAT_NONE",
            "dims": [4],
            "is_shape_tensor": False,
            "allow_ragged_batch": False,
            "optional": False,
            "is_non_linear_format_io": False,
        }
    ],
    "output": [
        {
            "name": "OUTPUT0",
            "data_type": "TYPE_FP32",
            "dims": [4],
            "label_filename": "",
            "is_shape_tensor": False,
            "is_non_linear_format_io": False,
        }
    ],
    "default_model_filename": "model.py",
}
"""``GET /v2/models/autopy/config`` for ``CONFIGLESS_PYTHON_MODEL_PY``: these keys
of the answer (the rest is Triton's normalization of any config, not of this case)."""

CONFIGLESS_PYTHON_METADATA = {
    "name": "autopy",
    "versions": ["1"],
    "platform": "python",
    "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
}
"""``GET /v2/models/autopy`` for the same model."""

CONFIGLESS_NO_MODEL_FILE_LOG = (
    "Poll failed for model directory 'nofile': Invalid model name: Could not determine "
    "backend for model 'nofile' with no backend in model configuration. Expected model "
    "name of the form 'model.<backend_name>'."
)
"""Triton's log line for a folder with neither a config nor a model file (``1/weights.bin``
only); the model is then absent from the server (``/config``: 404 unknown model)."""

OUTPUT_DTYPE_PASSTHROUGH = {
    "float64": ("FP64", [2.0, 4.0, 6.0, 8.0]),
    "int32": ("INT32", [2, 4, 6, 8]),
    "object_": ("BYTES", ["2.0", "4.0", "6.0", "8.0"]),
}
"""A python model whose config says ``OUTPUT0`` is TYPE_FP32 [4] returning
``(INPUT0 * 2).astype(dtype)`` for INPUT0 = [1, 2, 3, 4]: the answer's
``datatype`` and ``data`` over HTTP JSON (gRPC: the same datatype, and
``as_numpy`` has the model's dtype). Triton passes the tensor through
unconverted, with the model's dtype, and logs nothing (batched models too)."""

PYTHON_OPTIMIZATION = {
    "priority": "PRIORITY_DEFAULT",
    "input_pinned_memory": {"enable": True},
    "output_pinned_memory": {"enable": True},
    "gather_kernel_buffer_threshold": 0,
    "eager_batching": False,
}
"""``optimization`` in ``GET /v2/models/X/config`` of a python model whose
config sets none. A config setting part of it keeps its values and gets the
rest filled (``priority: PRIORITY_MAX`` -> the block with PRIORITY_MAX;
``input_pinned_memory { enable: false }`` -> that, and output pinned memory
true). An ensemble's answer has no ``optimization`` key; an ensemble config
that sets one fails to load: ``optimization should not be specified for
ensemble 'NAME'``."""

OVERRIDE_KEPT_SCENARIO = [
    ("load", "files"),
    ("load with config override", "override"),
    ("load", "override"),
    ("change a file, load", "files"),
    ("load with config override", "override"),
    ("unload, load", "files"),
]
"""Explicit model control, one python model, in order: after each step, the
config ``GET .../config`` answers with. A plain load after a load with a
config override is a no-op (no reload) that keeps the override while the
model's files are unchanged; once a file changes (model.py or config.pbtxt)
it reloads from the files; after an unload a plain load reads the files."""

SHARED_MEMORY_OUTPUTS_HTTP = {
    "model_name": "simple",
    "model_version": "1",
    "outputs": [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16]},
    ],
}
"""``POST /v2/models/simple/infer`` (INT32 [16] add/sub, max_batch_size 8) with both
outputs asked into registered system shared memory regions (``shared_memory_region``,
``shared_memory_byte_size`` 64, with or without an offset), as perf_analyzer
``--shared-memory system`` sends it: the whole answer, ``application/json``, no
``parameters`` on the outputs (perf_analyzer's HTTP client reads any output
``parameters`` as binary data and needs ``binary_data_size`` there). gRPC: the same
outputs without parameters, and one empty ``raw_output_contents`` entry each."""

FAILURE_COUNTS = {
    "valid": (1, 0, 1, 1),
    "wrong shape": (0, 0, 0, 0),
    "wrong datatype": (0, 0, 0, 0),
    "unknown input": (0, 0, 0, 0),
    "unknown input besides the right ones": (0, 0, 0, 0),
    "missing input": (0, 0, 0, 0),
    "batch over max_batch_size": (0, 0, 0, 0),
    "unknown output": (0, 0, 0, 0),
    "data shorter than the shape": (0, 0, 0, 0),
    "malformed JSON": (0, 0, 0, 0),
    "ensemble input of the wrong shape": (0, 0, 0, 0),
    "model answers InferenceResponse(error=...)": (1, 0, 1, 1),
    "model execute raises": (0, 1, 0, 1),
    "ensemble step answers an error": (0, 2, 0, 0),
}
"""What one HTTP infer request adds to ``/v2/models/M/stats`` (``success``,
``fail``, ``inference_count``, ``execution_count``) on the parity repository's
python models (``add_sub_py``; ``double``, an ensemble of it; ``answers_error``).
``nv_inference_request_success`` and ``nv_inference_request_failure`` move as
``success`` and ``fail`` do. A request refused before the model saw it counts
nowhere, whatever its status (400, or 500 for the last two of those). A model's
error answer is a success, though the client gets 500; a raised ``execute`` is
a failure with ``reason="BACKEND"``. An ensemble whose step answered an error
(the client gets a 500, or the step's 400 for ``INVALID_ARG``) counts two failures
for the one request (``reason="OTHER"``), the step one success.
Triton 2.51 labels the failure counter by
``reason`` (``REJECTED``, ``CANCELED``, ``BACKEND``, ``OTHER``, each exported
from 0). Triton updates the statistics after it has answered: read them only
once they have settled."""

FILE_LOAD_ANSWERS_HTTP = {
    "files without config": (500, "failed to load 'fresh', failed to poll from model repository"),
    "'..' leaving the folder": (
        500,
        "failed to load 'fresh', failed to poll from model repository",
    ),
    "'..' staying inside": (200, ""),
    "empty component": (200, ""),
    "absolute path": (
        400,
        "load failed for model 'fresh': at least one version must be available under the "
        "version policy of model 'fresh'\n",
    ),
    "config naming another model": (
        500,
        "failed to load 'fresh', failed to poll from model repository",
    ),
    "no version folder": (
        400,
        "load failed for model 'fresh': at least one version must be available under the "
        "version policy of model 'fresh'\n",
    ),
    "a path both file and folder": (
        500,
        "failed to load 'fresh', failed to poll from model repository",
    ),
    "file value not a string": (500, "attempt to access JSON non-string as string"),
}
"""Explicit model control, a python model's config and ``1/model.py`` sent as
``file:`` parameters to ``POST /v2/repository/models/fresh/load`` (a name the
repository does not hold), one change each: status and ``error``. The reasons
are only in Triton's log: ``Load parameter 'config' must be specified for
model file override``; ``Invalid file parameter 'file:../x/model.py' with
normalized path '/tmp/x/model.py' must stay within model directory.``
(``1/../1/model.py`` normalises inside and loads); ``Invalid file parameter
'file:1/model.py', directory has been created as a file``. An absolute path
is written below the temporary folder (``JoinPath``), so nothing is in a
version folder. gRPC answers the same texts (INTERNAL for the 500s,
INVALID_ARGUMENT for the 400s), and refuses a ``file:`` that is not a
bytes_param, or a ``config`` that is not a string_param, with INVALID_ARGUMENT
``invalid value type for load parameter 'file:1/model.py', expected
bytes_param.`` (``'config', expected string_param.``). A path component over
NAME_MAX (256 ``A``s, as NVIDIA's simple_grpc_model_control.py sends) kills
Triton 2.51: the call ends ``UNAVAILABLE`` and the server is gone."""

FILE_LOAD_SCENARIO = [
    ("load", 8),
    ("load with files, config max_batch_size 4", 4),
    ("load", 8),
    ("load with files, config max_batch_size 4", 4),
    ("load with config override max_batch_size 2", 2),
]
"""Explicit model control, a python model in the repository (max_batch_size
8): after each step, the ``max_batch_size`` ``GET .../config`` answers. A load
with files loads from them; a plain load after it goes back to the repository
folder; a config override without files loads the repository folder's files
with it. A model loaded only from files is not in ``POST
/v2/repository/index``; a plain load of it answers 500 ``failed to poll`` and
it keeps serving. A second load with files of a model already loaded from
files answers 200 without loading them (a ``model.py`` that raises at import
still answers 200; the log says ``Unexpected lifecycle state transition from
TRITONREPOAGENT_ACTION_LOAD_COMPLETE``)."""
