"""A real daemon exports an isolated python model's custom metrics
(``pb_utils.MetricFamily`` in the model's own processes, two instances) on
``GET /metrics`` as it does an in-process model's, and drops them once the
model is unloaded."""

from __future__ import annotations

import urllib.request

import numpy as np
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from daemon_process import wait_for
from model_fixtures import write_model

CONFIG = """
name: "iso_counting"
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }
"""

MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests = pb_utils.MetricFamily(
            name="iso_counting_requests",
            description="Requests the isolated model executed",
            kind=pb_utils.MetricFamily.COUNTER,
        ).Metric(labels=labels)
        self.sizes = pb_utils.MetricFamily(
            name="iso_counting_input_elements",
            description="Elements per request",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        ).Metric(labels=labels, buckets=[2.0, 8.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.requests.increment(1)
            self.sizes.observe(x.size)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
"""

LABELS = {"model": "iso_counting", "version": "1"}


def scrape(daemon) -> dict:
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(families: dict, family: str) -> dict:
    return {
        (s.name, s.labels.get("le", "")): s.value
        for s in families[family].samples
        if {k: v for k, v in s.labels.items() if k != "le"} == LABELS
    }


def test_isolated_custom_metrics_show_on_the_metrics_endpoint(tmp_path, start_daemon):
    repository = tmp_path / "repo"
    write_model(repository, "iso_counting", CONFIG, {"1/model.py": MODEL})
    daemon = start_daemon(repository, "--model-control-mode", "explicit", "--load-model", "*")
    with httpclient.InferenceServerClient(daemon.url) as client:
        for size in (1, 4, 16):
            tensor = httpclient.InferInput("IN", [size], "FP32")
            tensor.set_data_from_numpy(np.ones(size, np.float32))
            client.infer("iso_counting", [tensor])
        families = scrape(daemon)
        # Served as Triton serves it (`# TYPE iso_counting_requests counter`, samples under the
        # name); prometheus-client's parser reports a counter's samples as `_total`.
        assert families["iso_counting_requests"].type == "counter"
        assert samples(families, "iso_counting_requests") == {("iso_counting_requests_total", ""): 3}
        assert families["iso_counting_requests"].documentation == (
            "Requests the isolated model executed"
        )
        assert families["iso_counting_input_elements"].type == "histogram"
        assert samples(families, "iso_counting_input_elements") == {
            ("iso_counting_input_elements_bucket", "2.0"): 1,
            ("iso_counting_input_elements_bucket", "8.0"): 2,
            ("iso_counting_input_elements_bucket", "+Inf"): 3,
            ("iso_counting_input_elements_count", ""): 3,
            ("iso_counting_input_elements_sum", ""): 21,
        }
        client.unload_model("iso_counting")
        wait_for(
            lambda: "iso_counting_requests" not in scrape(daemon),
            timeout_s=10,
            what="the isolated model's custom metrics to leave /metrics after the unload",
        )
