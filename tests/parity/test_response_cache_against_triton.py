"""The response cache against the reference Triton 2.51, whose wheel ships
its local cache: both servers run ``--cache-config local,size=1048576`` over
the same python model with ``response_cache`` (and an ensemble with it over
a model without), take the same requests, and must count them alike in
``/v2/models/M/stats`` (success, cache hits and misses, inferences,
executions) and in the ``nv_cache_*_per_model`` metrics. Triton updates its
figures after it has answered, so its side is waited for (a deadline, then
the figures it had).

Only requests both servers answer alike are sent: Triton keeps an error
response as an empty success, and answers a request from an entry made for
other requested outputs; edgebox does neither (docs/configuration.md)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from daemon_process import wait_for
from model_fixtures import (
    ONE_CPU_INSTANCE,
    PYTHON_BACKEND,
    ensemble_config,
    model_config,
    write_model,
)

CACHE_FLAGS = ["--cache-config", "local,size=1048576"]

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = (x * 10).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", y)]))
        return responses
"""

REQUESTS = [
    ("cached", (1.0, 2.0)),
    ("cached", (1.0, 2.0)),
    ("cached", (3.0, 4.0)),
    ("cached", (1.0, 2.0)),
    ("cached", (1.0, 2.0)),
    ("plain", (1.0, 2.0)),
    ("plain", (1.0, 2.0)),
    ("pipeline", (5.0, 6.0)),
    ("pipeline", (5.0, 6.0)),
]
"""(model, X) in the order both servers get them."""
MODELS = ("cached", "plain", "pipeline")


def write_repository(root: Path) -> Path:
    for name, extra in (("cached", "response_cache { enable: true }"), ("plain", "")):
        config = model_config(
            name,
            PYTHON_BACKEND,
            {"X": ("FP32", [2])},
            {"Y": ("FP32", [2])},
            max_batch_size=4,
            extra=f"{ONE_CPU_INSTANCE}\n{extra}",
        )
        write_model(root, name, config, {"1/model.py": MODEL})
    pipeline = ensemble_config(
        "pipeline",
        {"IN": ("FP32", [2])},
        {"OUT": ("FP32", [2])},
        [("plain", {"X": "IN"}, {"Y": "OUT"})],
        max_batch_size=4,
    )
    write_model(root, "pipeline", f"{pipeline}\nresponse_cache {{ enable: true }}\n")
    (root / "pipeline" / "1").mkdir()
    return root


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    return write_repository(tmp_path_factory.mktemp("cache_parity") / "source")


@pytest.fixture(scope="module")
def triton_flags() -> list[str]:
    return CACHE_FLAGS


@pytest.fixture(scope="module")
def edgebox_flags() -> list[str]:
    return CACHE_FLAGS


def figures(server) -> dict:
    """Per model: (success, cache_hit, cache_miss, inference_count,
    execution_count); per (family, model) the ``nv_cache_num_*_per_model``
    values."""
    http, metrics = server.url, server.metrics_url
    found = {}
    for model in MODELS:
        with urllib.request.urlopen(f"http://{http}/v2/models/{model}/stats", timeout=10) as r:
            stats = json.load(r)["model_stats"][0]
        phases = stats["inference_stats"]
        found[model] = (
            phases["success"]["count"],
            phases["cache_hit"]["count"],
            phases["cache_miss"]["count"],
            stats["inference_count"],
            stats["execution_count"],
        )
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name.startswith("nv_cache_num_") and family.name.endswith("_per_model"):
            for sample in family.samples:
                found[(family.name, sample.labels["model"])] = sample.value
    return found


def send_all(url: str) -> list:
    answers_seen = []
    with httpclient.InferenceServerClient(url) as client:
        for model, values in REQUESTS:
            name = "IN" if model == "pipeline" else "X"
            tensor = httpclient.InferInput(name, [1, 2], "FP32")
            tensor.set_data_from_numpy(np.array([values], dtype=np.float32))
            answer = client.infer(model, [tensor])
            answers_seen.append(answer.as_numpy("OUT" if model == "pipeline" else "Y").tolist())
    return answers_seen


def test_hits_and_misses_are_counted_as_triton_counts_them(triton_server, edgebox_server):
    assert send_all(edgebox_server.url) == send_all(triton_server.url)
    ours = figures(edgebox_server)
    assert ours["cached"] == (5, 3, 2, 2, 2)
    assert ours["pipeline"][:3] == (2, 1, 1)
    assert ("nv_cache_num_hits_per_model", "plain") not in ours

    def triton_agrees() -> bool:
        return figures(triton_server) == ours

    try:
        wait_for(triton_agrees, 10, what="Triton's figures")
    except AssertionError:
        theirs = figures(triton_server)
        differing = {k: (ours.get(k), theirs.get(k)) for k in ours.keys() | theirs.keys()}
        pytest.fail("edgebox, Triton: " + str({k: v for k, v in differing.items() if v[0] != v[1]}))
