"""A real daemon's ``GET /metrics`` on its own port: it parses with
prometheus-client's parser, and Triton's counters match the requests made
over HTTP with tritonclient."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control, wait_for
from model_fixtures import add_sub_infer_inputs, write_model

REQUESTS = 5
LABELS = {"model": "add_sub", "version": "1"}


def scrape(daemon) -> dict:
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics", timeout=5) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict, name: str, labels: dict | None = None) -> float:
    [sample] = [s for s in families[name].samples if s.labels == (labels or {})]
    return sample.value


def _inputs(width: int = 16):
    data = np.ones((1, width), dtype=np.float32)
    return add_sub_infer_inputs(httpclient, data, data)


@pytest.fixture
def daemon(add_sub_repository, start_daemon):
    write_model(add_sub_repository, "broken", "name: {")
    return start_daemon(add_sub_repository, *explicit_control("*"))


def test_metrics_count_the_requests_made_over_http(daemon):
    assert f"Metrics service listening on 127.0.0.1:{daemon.metrics_port}" in daemon.log()
    with httpclient.InferenceServerClient(daemon.url) as client:
        for _ in range(REQUESTS):
            client.infer("add_sub", _inputs())
        with pytest.raises(InferenceServerException):
            client.infer("add_sub", _inputs(width=5))

    families = scrape(daemon)

    assert value(families, "nv_inference_request_success", LABELS) == REQUESTS
    # The rejected request never reached the model: no failure, as Triton counts.
    assert value(families, "nv_inference_request_failure", LABELS) == 0
    assert value(families, "nv_inference_count", LABELS) == REQUESTS
    assert value(families, "nv_inference_exec_count", LABELS) == REQUESTS
    for name in (
        "nv_inference_request_duration_us",
        "nv_inference_compute_input_duration_us",
        "nv_inference_compute_infer_duration_us",
        "nv_inference_compute_output_duration_us",
    ):
        assert value(families, name, LABELS) > 0, name
    assert value(families, "edgebox_model_unavailable", {"model": "broken", "version": ""}) == 1
    assert value(families, "edgebox_model_unavailable", LABELS) == 0
    assert value(families, "edgebox_event_drops") == 0


def test_telemetry_metrics_come_from_this_machine(daemon):
    """This test machine has no GPU: CPU and memory are exported, no nv_gpu_*."""
    families = wait_for(
        lambda: (f := scrape(daemon)) and "nv_cpu_utilization" in f and f,
        15,
        what="the first telemetry sample on /metrics",
    )

    assert 0 <= value(families, "nv_cpu_utilization") <= 1
    assert value(families, "nv_cpu_memory_used_bytes") > 0
    assert value(families, "nv_cpu_memory_total_bytes") >= value(
        families, "nv_cpu_memory_used_bytes"
    )
    assert not [name for name in families if name.startswith("nv_gpu_")]


def test_the_metrics_port_closes_on_shutdown(daemon):
    url = f"http://{daemon.metrics_url}/metrics"
    assert daemon.stop() == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)
