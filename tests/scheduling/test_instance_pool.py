from __future__ import annotations

import threading

import numpy as np
from google.protobuf import text_format

from edgebox.backends.base import InstanceSpec
from edgebox.repository.config import ModelConfig
from edgebox.scheduling.instance_pool import instance_specs
from edgebox.tensors import InferRequest, Tensor
from fakes import meeting_point
from model_fixtures import PYTHON_XY_CONFIG, write_model


def specs(text: str, gpu_ids: list[int]) -> list[InstanceSpec]:
    config = text_format.Parse(text, ModelConfig())
    return instance_specs(config, gpu_ids)


def test_count_instances_per_group_with_tritons_names():
    groups = """instance_group [ { name: "m_0" kind: KIND_CPU count: 2 }, { name: "m_1" kind: KIND_CPU } ]"""
    assert specs(groups, []) == [
        InstanceSpec("m_0_0", "CPU", 0),
        InstanceSpec("m_0_1", "CPU", 0),
        InstanceSpec("m_1_0", "CPU", 0),
    ]


def test_gpu_groups_get_count_instances_per_listed_gpu():
    groups = """instance_group [ { name: "g" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] } ]"""
    assert [(s.name, s.kind, s.device_id) for s in specs(groups, [0, 1])] == [
        ("g_0", "GPU", 0),
        ("g_1", "GPU", 0),
        ("g_2", "GPU", 1),
        ("g_3", "GPU", 1),
    ]


def test_kind_auto_is_gpu_only_where_a_gpu_exists():
    groups = """instance_group [ { name: "a" kind: KIND_AUTO } ]"""
    assert specs(groups, [0])[0].kind == "GPU"
    assert specs(groups, [])[0].kind == "CPU"


def test_dla_secondary_devices_reach_the_backend():
    groups = """instance_group [ { name: "dla" kind: KIND_GPU count: 1
                                   secondary_devices [ { kind: KIND_NVDLA device_id: 1 } ] } ]"""
    (spec,) = specs(groups, [0])
    assert spec.secondary_devices == (("KIND_NVDLA", 1),)


MEETING_MODEL = """
import triton_python_backend_utils as pb_utils
from fakes import meeting_point


class TritonPythonModel:
    def initialize(self, args):
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        meeting_point.instances_seen.add(self.instance)
        meeting_point.barrier.wait()
        x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x)])]
"""


def test_two_instances_execute_in_parallel(tmp_path, stack):
    meeting_point.reset()
    config = (
        PYTHON_XY_CONFIG.format(name="pair") + "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    )
    write_model(tmp_path, "pair", config, {"1/model.py": MEETING_MODEL})
    stack.manager.load_model("pair")
    results: list = []

    def call() -> None:
        request = InferRequest("pair", [Tensor("X", "FP32", np.ones(2, np.float32))])
        results.append(stack.dataplane.infer(request).model_version)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert results == ["1", "1"], "the two requests did not run at the same time"
    assert meeting_point.instances_seen == {"pair_0_0", "pair_0_1"}
