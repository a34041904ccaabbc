"""python_backend's custom metrics (``pb_utils.MetricFamily`` / ``Metric``)
from a model.py: they load, count per request, answer ``value()``, refuse
what Triton 2.51 refuses with its texts, and leave the registry the daemon
exports when the model is unloaded."""

from __future__ import annotations

import gc
import textwrap

import numpy as np
import pytest

from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python import custom_metrics as custom
from edgebox.backends.python import triton_python_backend_utils as pb_utils
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, Tensor
from model_fixtures import write_model

CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "COUNT" data_type: TYPE_FP64 dims: [ 1 ] } ]
"""

# In the shape of python_backend's examples/custom_metrics model.py.
COUNTING_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.requests_family = pb_utils.MetricFamily(
            name="requests_seen",
            description="Requests this model executed",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.sizes_family = pb_utils.MetricFamily(
            name="input_size",
            description="Elements per request",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests = self.requests_family.Metric(labels=labels)
        self.sizes = self.sizes_family.Metric(labels=labels, buckets=[1.0, 4.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.requests.increment(1)
            self.sizes.observe(x.size)
            count = np.array([self.requests.value()], np.float64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("COUNT", count)]))
        return responses
"""


@pytest.fixture
def load(tmp_path):
    loaded = []

    def load(model_py: str, name: str = "counting"):
        model_dir = write_model(tmp_path, name, CONFIG, {"1/model.py": textwrap.dedent(model_py)})
        context = ModelContext(name, 1, read_model_config(model_dir), model_dir, model_dir / "1")
        backend = Backend()
        backend.complete_config(context)
        instance = backend.load_instance(context, InstanceSpec(f"{name}_0", "CPU"))
        loaded.append((backend, context, instance))
        return backend, context, instance

    yield load
    for backend, context, instance in loaded:
        instance.close()
        backend.unload(context)
    loaded.clear()
    gc.collect()


def request(size: int) -> InferRequest:
    return InferRequest("counting", [Tensor("IN", "FP32", np.zeros(size, np.float32))])


def families() -> dict[str, custom.FamilySnapshot]:
    return {family.name: family for family in custom.registry.snapshot()}


def test_custom_counter_and_histogram_count_each_request(load) -> None:
    _, _, instance = load(COUNTING_MODEL)
    answers = [instance.execute([request(size)])[0] for size in (1, 3, 9)]
    assert all(isinstance(a, InferResponse) for a in answers), answers
    assert [a.output("COUNT").data[0] for a in answers] == [1, 2, 3]
    seen = families()
    (counter,) = seen["requests_seen"].series
    assert (seen["requests_seen"].kind, counter.labels, counter.value) == (
        "counter",
        {"model": "counting", "version": "1"},
        3,
    )
    (sizes,) = seen["input_size"].series
    assert seen["input_size"].description == "Elements per request"
    assert (sizes.buckets, sizes.counts, sizes.sum) == ((1.0, 4.0), (1, 1, 1), 13)


def test_custom_metrics_leave_the_registry_when_the_model_is_unloaded(tmp_path) -> None:
    model_dir = write_model(tmp_path, "counting", CONFIG, {"1/model.py": COUNTING_MODEL})
    context = ModelContext("counting", 1, read_model_config(model_dir), model_dir, model_dir / "1")
    backend = Backend()
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("counting_0", "CPU"))
    instance.execute([request(2)])
    assert {"requests_seen", "input_size"} <= set(families())
    instance.close()
    backend.unload(context)
    del instance
    gc.collect()
    assert not {"requests_seen", "input_size"} & set(families())


def probe(call) -> str:
    with pytest.raises(pb_utils.TritonModelException) as caught:
        call()
    return caught.value.message()


def test_custom_metric_misuse_raises_tritons_errors() -> None:
    counter = pb_utils.MetricFamily("probe_count", "a counter", pb_utils.MetricFamily.COUNTER)
    histogram = pb_utils.MetricFamily("probe_hist", "a histogram", pb_utils.MetricFamily.HISTOGRAM)
    gauge = pb_utils.MetricFamily("probe_gauge", "a gauge", pb_utils.MetricFamily.GAUGE)
    count = counter.Metric(labels={"k": "v"})
    observed = histogram.Metric(labels={"k": "v"}, buckets=[0.5, 2.0])
    level = gauge.Metric(labels={"k": "v"})
    level.set(7)
    level.increment(-2)
    assert level.value() == 5
    assert probe(lambda: count.increment(-1)) == (
        "Failed to increment metric value: TRITONSERVER_METRIC_KIND_COUNTER can only be "
        "incremented monotonically by non-negative values."
    )
    assert probe(lambda: count.set(5)) == (
        "Failed to set metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support Set"
    )
    assert probe(lambda: count.observe(5)) == (
        "Failed to observe metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support Observe"
    )
    assert probe(observed.value) == (
        "Failed to get metric value: TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value"
    )
    assert probe(lambda: histogram.Metric(labels={"a": "b"})) == (
        "Failed to create metric. Missing required buckets."
    )
    assert probe(lambda: counter.Metric(labels={"a": "b"}, buckets=[1.0])) == (
        "Failed to create metric. Unexpected buckets found."
    )
    assert probe(
        lambda: pb_utils.MetricFamily("probe_count", "other", pb_utils.MetricFamily.GAUGE)
    ) == ("Error when creating MetricFamily: Family name already exists with different type")
    with pytest.raises(TypeError):
        pb_utils.MetricFamily("probe_other", "d", 5)
    assert [int(k) for k in (counter.COUNTER, counter.GAUGE, counter.HISTOGRAM)] == [0, 1, 2]


def test_metric_kinds_are_module_constants_as_examples_use_them() -> None:
    # python_backend's examples/custom_metrics passes kind=pb_utils.COUNTER: the
    # stub's MetricKind enum exports its values into the module.
    assert (pb_utils.COUNTER, pb_utils.GAUGE, pb_utils.HISTOGRAM) == (
        pb_utils.MetricFamily.COUNTER,
        pb_utils.MetricFamily.GAUGE,
        pb_utils.MetricFamily.HISTOGRAM,
    )
    family = pb_utils.MetricFamily(
        name="example_style_kind_total", description="kind from the module", kind=pb_utils.COUNTER
    )
    family.Metric(labels={"model": "m"}).increment(2)
