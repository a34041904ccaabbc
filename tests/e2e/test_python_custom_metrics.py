"""A real daemon exports a python model's custom metrics
(``pb_utils.MetricFamily``) on ``GET /metrics`` with its own, counted per
request sent with tritonclient, and drops them once the model is unloaded:
in the daemon, and from an isolated model's two processes alike."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from daemon_process import explicit_control, wait_for
from model_fixtures import PYTHON_BACKEND, model_config, write_model

CONFIG = model_config(
    "counting", PYTHON_BACKEND, {"IN": ("FP32", [-1])}, {"OUT": ("FP32", [-1])}, max_batch_size=None
)
ISOLATED = """
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }
"""

# In the shape of python_backend's examples/custom_metrics model.py.
MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        requests = pb_utils.MetricFamily(
            name="counting_requests",
            description="Requests the counting model executed",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        sizes = pb_utils.MetricFamily(
            name="counting_input_elements",
            description="Elements per request",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests = requests.Metric(labels=labels)
        self.sizes = sizes.Metric(labels=labels, buckets=[2.0, 8.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            self.requests.increment(1)
            self.sizes.observe(x.as_numpy().size)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x.as_numpy())]))
        return responses
"""

LABELS = {"model": "counting", "version": "1"}


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


@pytest.mark.parametrize("isolated", [False, True], ids=["in_process", "isolated"])
def test_custom_counter_and_histogram_show_on_the_metrics_endpoint(
    tmp_path, start_daemon, isolated
):
    repository = tmp_path / "repo"
    config = CONFIG + (ISOLATED if isolated else "")
    write_model(repository, "counting", config, {"1/model.py": MODEL})
    daemon = start_daemon(repository, *explicit_control("*"))
    with httpclient.InferenceServerClient(daemon.url) as client:
        for size in (1, 4, 16):
            tensor = httpclient.InferInput("IN", [size], "FP32")
            tensor.set_data_from_numpy(np.ones(size, np.float32))
            client.infer("counting", [tensor])
        families = scrape(daemon)
        # Served as Triton serves it (`# TYPE counting_requests counter`, samples under the
        # name); prometheus-client's parser reports a counter's samples as `_total`.
        assert families["counting_requests"].type == "counter"
        assert samples(families, "counting_requests") == {("counting_requests_total", ""): 3}
        assert families["counting_requests"].documentation == (
            "Requests the counting model executed"
        )
        assert families["counting_input_elements"].type == "histogram"
        assert samples(families, "counting_input_elements") == {
            ("counting_input_elements_bucket", "2.0"): 1,
            ("counting_input_elements_bucket", "8.0"): 2,
            ("counting_input_elements_bucket", "+Inf"): 3,
            ("counting_input_elements_count", ""): 3,
            ("counting_input_elements_sum", ""): 21,
        }
        client.unload_model("counting")
        wait_for(
            lambda: "counting_requests" not in scrape(daemon),
            timeout_s=10,
            what="the custom metrics to leave /metrics after the unload",
        )
