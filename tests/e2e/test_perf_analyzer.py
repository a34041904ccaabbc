"""NVIDIA's perf_analyzer (tritonclient 2.41.0's binary, scripts/perf_analyzer.py)
against the real daemon, as the field test ran it: inputs and outputs in
system shared memory, and 300 concurrent keep-alive connections from one host,
over HTTP and gRPC. Each must finish without an error and every request it sent
must have succeeded. Skipped, with the reason, where the binary or a library
it links is missing (``make perf-analyzer`` installs them; ``make test`` does)."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from daemon_process import DaemonProcess
from model_fixtures import PYTHON_BACKEND, add_sub_tensors, model_config, write_model
from scripts.perf_analyzer import DEFAULT_HOME, PerfAnalyzer

SIMPLE_CONFIG = model_config("simple", PYTHON_BACKEND, *add_sub_tensors("INT32"), max_batch_size=8)
"""Triton's ``simple`` example model (sum and difference), which perf_analyzer's
documentation runs against; a python model here."""

SIMPLE_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
                )
            )
        return responses
"""

RUN_TIMEOUT_S = 180
QUICK = ["--measurement-mode", "count_windows", "-s", "1000", "-r", "5"]
"""Three windows of a few hundred requests settle it: the test is about every
request succeeding, not about stable figures on a shared machine."""


@pytest.fixture(scope="module")
def perf_analyzer() -> PerfAnalyzer:
    analyzer = PerfAnalyzer(Path(os.environ.get("EDGEBOX_PERF_ANALYZER_HOME", DEFAULT_HOME)))
    reason = analyzer.unusable()
    if reason is not None:
        pytest.skip(reason)
    return analyzer


@pytest.fixture(scope="module")
def repository(repository):
    write_model(repository, "simple", SIMPLE_CONFIG, {"1/model.py": SIMPLE_PY})
    return repository


def failures(daemon: DaemonProcess) -> int:
    with urllib.request.urlopen(f"http://{daemon.url}/v2/models/simple/stats", timeout=10) as r:
        return json.load(r)["model_stats"][0]["inference_stats"]["fail"]["count"]


def run(perf_analyzer: PerfAnalyzer, daemon: DaemonProcess, *args: str) -> str:
    """perf_analyzer's report; fails with its output when it reports an error."""
    before = failures(daemon)
    done = perf_analyzer.run(["-m", "simple", *QUICK, *args], RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"perf_analyzer exited with {done.returncode}:\n{output}"
    assert "error" not in output.lower(), output
    assert failures(daemon) == before
    return output


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_shared_memory_system(perf_analyzer, daemon, protocol):
    url = daemon.url if protocol == "http" else daemon.grpc_url
    output = run(
        perf_analyzer,
        daemon,
        *("-u", url, "-i", protocol, "--shared-memory", "system"),
        *("--concurrency-range", "4", "--measurement-request-count", "200"),
    )
    assert re.search(r"Concurrency: 4, throughput: [1-9]", output), output


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_300_connections_from_one_host(perf_analyzer, daemon, protocol):
    url = daemon.url if protocol == "http" else daemon.grpc_url
    output = run(
        perf_analyzer,
        daemon,
        *("-u", url, "-i", protocol),
        *("--concurrency-range", "300", "--measurement-request-count", "600"),
    )
    assert re.search(r"Concurrency: 300, throughput: [1-9]", output), output
