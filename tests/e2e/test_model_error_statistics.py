"""A python model's error answers and failures, counted in
``/v2/models/M/stats`` as Triton 2.51 counts them (measured on the reference
server, python backend, max_batch_size 0), in process and isolated alike:
``InferenceResponse(error=...)`` is a success (inference, execution, queue and
compute counts +1) though the client gets a 500; an ``execute`` that raised is
one execution and one failure, nothing else."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from model_fixtures import add_python_xy

ISOLATED = """
parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }
"""

# X[0] == -5: execute raises; X[0] < 0: answered with the model's error.
ERROR_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == -5:
                raise pb_utils.TritonModelException("raised")
            if x[0] < 0:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative")))
            else:
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return out
"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    add_python_xy(repo, "inproc", ERROR_MODEL)
    add_python_xy(repo, "isolated", ERROR_MODEL, config_extra=ISOLATED)
    return repo


def counts(url: str, model: str) -> tuple[int, ...]:
    """(inference, execution, success, fail, queue, compute_infer) counts."""
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=10) as reply:
        stats = json.loads(reply.read())["model_stats"][0]
    phases = stats["inference_stats"]
    return (
        stats["inference_count"],
        stats["execution_count"],
        phases["success"]["count"],
        phases["fail"]["count"],
        phases["queue"]["count"],
        phases["compute_infer"]["count"],
    )


def delta_of(url: str, client, model: str, value: float) -> tuple[str, tuple[int, ...]]:
    before = counts(url, model)
    tensor = httpclient.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(np.array([value, 0], np.float32))
    try:
        client.infer(model, [tensor])
        answer = "ok"
    except InferenceServerException as exc:
        answer = f"{exc.status()} {exc.message()}"
    after = counts(url, model)
    return answer, tuple(a - b for a, b in zip(after, before, strict=True))


@pytest.mark.parametrize("model", ["inproc", "isolated"])
def test_error_answers_count_as_successes_and_raises_as_failures(
    start_daemon, repository, model
) -> None:
    daemon = start_daemon(repository)
    client = httpclient.InferenceServerClient(daemon.url)
    url = daemon.url

    assert delta_of(url, client, model, 1) == ("ok", (1, 1, 1, 0, 1, 1))
    assert delta_of(url, client, model, -1) == (
        f"500 model '{model}' version 1: negative",
        (1, 1, 1, 0, 1, 1),
    )
    answer, delta = delta_of(url, client, model, -5)
    assert answer.startswith(
        f"500 model '{model}' version 1: execute() raised TritonModelException"
    )
    assert delta == (0, 1, 0, 1, 0, 0)
