"""``--rate-limit execution_count`` in the real daemon: instances of two
models that each need the one copy of a resource never execute at the same
time, though clients send to both at once; and a resource given on the
command line too small for a model's instances fails that model's load with
Triton's reason."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from model_fixtures import add_python_xy

RATE_LIMITED = """
instance_group [ {{
  kind: KIND_CPU
  count: 2
  rate_limiter {{ resources [ {{ name: "R1" count: {count} }} ] priority: 1 }}
}} ]
"""

RECORDING_MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        log = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(log, b"+")
            time.sleep(0.01)
            os.write(log, b"-")
        finally:
            os.close(log)
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""
"""Y = X, marking each execute's start and end in a shared file: executes
that overlap leave ``++`` in it. The 10 ms execute is the work that would
overlap, not a wait for anything."""

MODELS = ("big", "small")
REQUESTS_PER_CLIENT = 8


def executes_log(module_path: Path) -> Path:
    return module_path / "executes.log"


@pytest.fixture(scope="module")
def daemon_args(module_path: Path) -> list[str]:
    return ["--rate-limit", "execution_count"]


@pytest.fixture(scope="module")
def repository(repository: Path, module_path: Path) -> Path:
    model_py = RECORDING_MODEL.format(log=str(executes_log(module_path)))
    for name in MODELS:
        add_python_xy(repository, name, model_py, RATE_LIMITED.format(count=1))
    return repository


def test_instances_sharing_the_last_copy_of_a_resource_never_execute_together(
    daemon, module_path: Path
) -> None:
    errors: list[BaseException] = []

    def client(model: str) -> None:
        try:
            with httpclient.InferenceServerClient(daemon.url) as connection:
                for i in range(REQUESTS_PER_CLIENT):
                    x = np.array([i, -i], dtype=np.float32)
                    inputs = [httpclient.InferInput("X", [2], "FP32")]
                    inputs[0].set_data_from_numpy(x)
                    result = connection.infer(model, inputs)
                    np.testing.assert_array_equal(result.as_numpy("Y"), x)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(m,)) for m in MODELS for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    marks = executes_log(module_path).read_text()
    assert len(marks) == 2 * len(threads) * REQUESTS_PER_CLIENT
    assert marks == "+-" * (len(marks) // 2), f"executes overlapped: {marks}"


def test_a_given_resource_too_small_for_an_instance_fails_its_load(
    start_daemon, tmp_path: Path
) -> None:
    repository = tmp_path / "models"
    add_python_xy(repository, "greedy", config_extra=RATE_LIMITED.format(count=4))
    add_python_xy(repository, "modest", config_extra=RATE_LIMITED.format(count=1))
    daemon = start_daemon(
        repository, "--rate-limit", "execution_count", "--rate-limit-resource", "R1:2"
    )
    with httpclient.InferenceServerClient(daemon.url) as client:
        assert client.is_model_ready("modest")
        assert not client.is_model_ready("greedy")
        index = {entry["name"]: entry for entry in client.get_model_repository_index()}
    assert (
        'Resource count for "R1" is limited to 2 which will prevent scheduling of one or '
        "more model instances, the minimum required count is 4"
    ) in index["greedy"]["reason"]
