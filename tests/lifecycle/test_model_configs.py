"""A model folder without ``config.pbtxt`` loads as in Triton: the backend
follows from its model file and the backend completes the config (python's
``auto_complete_config``, ONNX's inputs and outputs). A folder with neither a
config nor a model file is UNAVAILABLE with a reason that says what was looked for."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from edgebox.errors import ConfigError
from edgebox.lifecycle.states import ModelState
from edgebox.repository.config import config_to_dict
from edgebox.tensors import InferRequest, Tensor
from model_fixtures import add_add_sub

AUTO_COMPLETED_DOUBLER = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return out
"""


def test_python_model_without_config_loads_with_what_auto_complete_config_adds(
    tmp_path, stack
) -> None:
    version_dir = tmp_path / "doubler" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "model.py").write_text(textwrap.dedent(AUTO_COMPLETED_DOUBLER))
    stack.manager.load_model("doubler")
    config = config_to_dict(stack.registry.get("doubler").config)
    assert (config["name"], config["backend"], config["platform"]) == ("doubler", "python", "")
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("X", "TYPE_FP32", [2])
    ]
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["output"]] == [
        ("Y", "TYPE_FP32", [2])
    ]
    response = stack.infer("doubler")
    np.testing.assert_array_equal(response.outputs[0].data, [2.0, 4.0])


def test_onnx_model_without_config_loads_with_the_models_inputs_and_outputs(
    tmp_path, stack
) -> None:
    add_add_sub(tmp_path, "add_sub")
    (tmp_path / "add_sub" / "config.pbtxt").unlink()
    stack.manager.load_model("add_sub")
    config = stack.registry.get("add_sub").config
    assert (config.platform, config.backend) == ("onnxruntime_onnx", "onnxruntime")
    assert sorted(t.name for t in config.input) == ["INPUT0", "INPUT1"]
    assert sorted(t.name for t in config.output) == ["OUTPUT0", "OUTPUT1"]
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    request = InferRequest("add_sub", [Tensor("INPUT0", "FP32", a), Tensor("INPUT1", "FP32", a)])
    outputs = {t.name: t.data for t in stack.dataplane.infer(request).outputs}
    np.testing.assert_array_equal(outputs["OUTPUT0"], a + a)
    np.testing.assert_array_equal(outputs["OUTPUT1"], a - a)


def test_folder_without_config_or_model_file_is_unavailable_saying_what_was_looked_for(
    tmp_path, stack
) -> None:
    (tmp_path / "weights" / "1").mkdir(parents=True)
    (tmp_path / "weights" / "1" / "weights.bin").write_bytes(b"\0")
    expected = (
        f"{tmp_path / 'weights'}: no config.pbtxt, and no version folder holds a model file "
        "to tell the backend from (looked for 'model.onnx', 'model.plan', 'model.py')"
    )
    with pytest.raises(ConfigError) as info:
        stack.manager.load_model("weights")
    assert str(info.value) == expected
    status = stack.registry.statuses("weights")[None]
    assert (status.state, status.reason) == (ModelState.UNAVAILABLE, expected)
