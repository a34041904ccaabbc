"""Triton's response cache in the real daemon (``--cache-config
local,size=N``), driven by tritonclient over HTTP and gRPC: a repeated
request is answered without running the model (its python ``execute``
writes one mark per request into a file outside the repository), and the
hits and misses show in both statistics answers and in the ``nv_cache_*``
metrics; the cache evicts the least recently used answer when full; a model
without ``response_cache`` never hits; a hit still writes outputs asked into
shared memory."""

from __future__ import annotations

import os
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from prometheus_client.parser import text_string_to_metric_families

from daemon_process import explicit_control
from model_fixtures import (
    ONE_CPU_INSTANCE,
    PYTHON_BACKEND,
    ensemble_config,
    model_config,
    write_model,
)

ENTRY_BYTES = 2 * 4 + len("Y")
"""One kept answer of the counting models: Y, two FP32 values."""
CACHE_ENTRIES = 3
pytestmark = pytest.mark.daemon_flags(
    *explicit_control("*"), "--cache-config", f"local,size={CACHE_ENTRIES * ENTRY_BYTES}"
)

COUNTING_MODEL = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.calls = parameters["calls_file"]["string_value"]

    def execute(self, requests):
        with open(self.calls, "a") as marks:
            marks.write("x" * len(requests))
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = (x * 10).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", y)]))
        return responses
"""


def counting_model(repository: Path, name: str, calls: Path, extra: str = "") -> None:
    parameter = f'parameters {{ key: "calls_file" value: {{ string_value: "{calls}" }} }}'
    config = model_config(
        name,
        PYTHON_BACKEND,
        {"X": ("FP32", [2])},
        {"Y": ("FP32", [2])},
        max_batch_size=4,
        extra=f"{ONE_CPU_INSTANCE}\n{parameter}\n{extra}",
    )
    write_model(repository, name, config, {"1/model.py": COUNTING_MODEL})


CACHED = "response_cache { enable: true }"


@pytest.fixture(scope="module")
def repository(repository, module_path):
    counting_model(repository, "cached", module_path / "cached.calls", CACHED)
    counting_model(repository, "plain", module_path / "plain.calls")
    pipeline = ensemble_config(
        "pipeline",
        {"IN": ("FP32", [2])},
        {"OUT": ("FP32", [2])},
        [("plain", {"X": "IN"}, {"Y": "OUT"})],
        max_batch_size=4,
    )
    write_model(repository, "pipeline", f"{pipeline}\n{CACHED}\n", {"1/.keep": ""})
    return repository


def calls(module_path: Path, model: str) -> int:
    path = module_path / f"{model}.calls"
    return len(path.read_text()) if path.exists() else 0


def x_inputs(client_module, a: float, b: float, name: str = "X") -> list:
    tensor = client_module.InferInput(name, [1, 2], "FP32")
    tensor.set_data_from_numpy(np.array([[a, b]], dtype=np.float32))
    return [tensor]


def cache_phases(client, model: str) -> tuple[int, int, int, int]:
    """(success, cache_hit, cache_miss, execution_count) from the statistics answer."""
    as_json = {"as_json": True} if isinstance(client, grpcclient.InferenceServerClient) else {}
    stats = client.get_inference_statistics(model, **as_json)["model_stats"][0]
    phases = stats["inference_stats"]

    def count(phase: str) -> int:
        return int(phases.get(phase, {}).get("count", 0))

    return (
        count("success"),
        count("cache_hit"),
        count("cache_miss"),
        int(stats.get("execution_count", 0)),
    )


def scrape(daemon) -> dict:
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def sample(families: dict, name: str, labels: dict | None = None) -> float:
    [found] = [s for s in families[name].samples if s.labels == (labels or {})]
    return found.value


def test_a_repeated_request_is_a_hit_over_http_and_grpc(
    daemon, module_path, http_client, grpc_client
):
    labels = {"model": "cached", "version": "1"}
    metrics_before = scrape(daemon)
    stats_before = cache_phases(http_client, "cached")
    before = calls(module_path, "cached")
    first = http_client.infer("cached", x_inputs(httpclient, 1.0, 2.0))
    second = http_client.infer("cached", x_inputs(httpclient, 1.0, 2.0), request_id="again")
    third = grpc_client.infer("cached", x_inputs(grpcclient, 1.0, 2.0))

    assert calls(module_path, "cached") - before == 1
    for answer in (first, second, third):
        np.testing.assert_array_equal(answer.as_numpy("Y"), [[10.0, 20.0]])
    assert second.get_response()["id"] == "again"
    # Both transports report Triton's counts: three successes, two of them
    # hits; one miss, one execution.
    for client in (http_client, grpc_client):
        now = cache_phases(client, "cached")
        assert [a - b for a, b in zip(now, stats_before, strict=True)] == [3, 2, 1, 1]
    families = scrape(daemon)
    for name, grown in (
        ("nv_cache_num_hits_per_model", 2),
        ("nv_cache_num_misses_per_model", 1),
        ("nv_inference_request_success", 3),
        ("nv_inference_count", 1),
    ):
        assert sample(families, name, labels) - sample(metrics_before, name, labels) == grown
    assert sample(families, "nv_cache_num_hits") - sample(metrics_before, "nv_cache_num_hits") == 2


def test_a_different_request_is_a_miss_and_runs(module_path, http_client):
    before = calls(module_path, "cached")
    _, hits, misses, _ = cache_phases(http_client, "cached")
    answer = http_client.infer("cached", x_inputs(httpclient, 3.0, 4.0))
    np.testing.assert_array_equal(answer.as_numpy("Y"), [[30.0, 40.0]])
    answer = http_client.infer("cached", x_inputs(httpclient, 4.0, 3.0))
    np.testing.assert_array_equal(answer.as_numpy("Y"), [[40.0, 30.0]])

    assert calls(module_path, "cached") - before == 2
    assert cache_phases(http_client, "cached")[1:3] == (hits, misses + 2)


def test_the_least_recently_used_answer_is_evicted_when_full(daemon, module_path, http_client):
    evictions = sample(scrape(daemon), "nv_cache_num_evictions")
    before = calls(module_path, "cached")
    for value in (100.0, 101.0, 102.0, 103.0):
        http_client.infer("cached", x_inputs(httpclient, value, 0.0))
    assert calls(module_path, "cached") - before == 4

    http_client.infer("cached", x_inputs(httpclient, 103.0, 0.0))
    assert calls(module_path, "cached") - before == 4
    answer = http_client.infer("cached", x_inputs(httpclient, 100.0, 0.0))
    np.testing.assert_array_equal(answer.as_numpy("Y"), [[1000.0, 0.0]])
    assert calls(module_path, "cached") - before == 5
    families = scrape(daemon)
    assert sample(families, "nv_cache_num_evictions") > evictions
    assert sample(families, "nv_cache_num_entries") == CACHE_ENTRIES
    assert sample(families, "nv_cache_util") == 1.0


def test_a_model_without_response_cache_never_hits(daemon, module_path, grpc_client):
    before = calls(module_path, "plain")
    for _ in range(2):
        grpc_client.infer("plain", x_inputs(grpcclient, 5.0, 6.0))

    assert calls(module_path, "plain") - before == 2
    assert cache_phases(grpc_client, "plain")[1:3] == (0, 0)
    series = scrape(daemon)["nv_cache_num_hits_per_model"].samples
    assert "plain" not in {s.labels["model"] for s in series}


def test_an_ensemble_is_answered_from_the_cache_without_its_step(module_path, grpc_client):
    before = calls(module_path, "plain")
    for _ in range(2):
        answer = grpc_client.infer("pipeline", x_inputs(grpcclient, 7.0, 8.0, name="IN"))
        np.testing.assert_array_equal(answer.as_numpy("OUT"), [[70.0, 80.0]])

    assert calls(module_path, "plain") - before == 1
    assert cache_phases(grpc_client, "pipeline")[1:3] == (1, 1)


def test_a_hit_writes_outputs_asked_into_shared_memory(module_path, http_client):
    key = f"/edgebox-cache-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    region = shm.create_shared_memory_region("cache_out", key, 8)
    try:
        http_client.register_system_shared_memory("cache_out", key, 8)
        # The outputs asked for are part of the key: ask for Y both times.
        asked = [httpclient.InferRequestedOutput("Y")]
        http_client.infer("cached", x_inputs(httpclient, 9.0, 1.0), outputs=asked)
        before = calls(module_path, "cached")
        output = httpclient.InferRequestedOutput("Y")
        output.set_shared_memory("cache_out", 8)
        http_client.infer("cached", x_inputs(httpclient, 9.0, 1.0), outputs=[output])

        assert calls(module_path, "cached") == before
        written = shm.get_contents_as_numpy(region, np.float32, [1, 2])
        np.testing.assert_array_equal(written, [[90.0, 10.0]])
    finally:
        http_client.unregister_system_shared_memory("cache_out")
        shm.destroy_shared_memory_region(region)
