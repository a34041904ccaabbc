"""An isolated python model's custom metrics (``pb_utils.MetricFamily`` in
its own process) reach the daemon's registry, the one ``/metrics`` exports,
with the names, labels, kinds and values the in-process case has; two
instances add up, unloading removes them, and a model cannot grow the
daemon's copy past its caps."""

from __future__ import annotations

import gc
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from daemon_process import wait_for
from edgebox.backends.base import InstanceSpec, ModelContext
from edgebox.backends.python import Backend
from edgebox.backends.python import custom_metrics as custom
from edgebox.backends.python.isolation import IsolationOptions
from edgebox.backoff import Backoff
from edgebox.errors import EdgeboxError
from edgebox.repository.config import read_model_config
from edgebox.tensors import InferRequest, InferResponse, Tensor

OPTIONS = IsolationOptions(
    mode="process", restart_backoff=Backoff(initial_s=0.05, max_s=0.2), finalize_timeout_s=2.0
)

CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# Size 13 ends its process.
METERED_MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests = pb_utils.MetricFamily(
            name="iso_requests", description="Requests seen", kind=pb_utils.MetricFamily.COUNTER
        ).Metric(labels=labels)
        self.last = pb_utils.MetricFamily(
            name="iso_last_size", description="Last size", kind=pb_utils.MetricFamily.GAUGE
        ).Metric(labels=labels)
        self.sizes = pb_utils.MetricFamily(
            name="iso_sizes", description="Sizes", kind=pb_utils.MetricFamily.HISTOGRAM
        ).Metric(labels=labels, buckets=[1.0, 4.0])
        self.last.set(-1)

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x.size == 13:
                os._exit(3)
            self.requests.increment(1)
            self.last.set(x.size)
            self.sizes.observe(x.size)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
"""

GREEDY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.kept = []
        for f in range({families}):
            family = pb_utils.MetricFamily(
                name=f"greedy_{{f}}", description="many", kind=pb_utils.MetricFamily.GAUGE
            )
            self.kept.append(family)
        family = self.kept[0]
        for s in range({series}):
            self.kept.append(family.Metric(labels={{"s": str(s)}}))

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""


class Loaded:
    def __init__(self, backend: Backend, context: ModelContext, instances: list) -> None:
        self.backend = backend
        self.context = context
        self.instances = instances

    def close(self) -> None:
        for instance in self.instances:
            instance.close()
        self.instances = []
        self.backend.unload(self.context)


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Callable[..., Loaded]]:
    loaded: list[Loaded] = []

    def load_model(model_py: str, instances: int = 1, name: str = "metered") -> Loaded:
        model_dir = tmp_path / name
        (model_dir / "1").mkdir(parents=True)
        (model_dir / "config.pbtxt").write_text(textwrap.dedent(CONFIG))
        (model_dir / "1" / "model.py").write_text(textwrap.dedent(model_py).lstrip())
        context = ModelContext(name, 1, read_model_config(model_dir), model_dir, model_dir / "1")
        backend = Backend(OPTIONS)
        backend.complete_config(context)
        model = Loaded(
            backend,
            context,
            [
                backend.load_instance(context, InstanceSpec(f"{name}_{i}", "CPU"))
                for i in range(instances)
            ],
        )
        loaded.append(model)
        return model

    yield load_model
    for model in loaded:
        model.close()
    gc.collect()


def families() -> dict[str, custom.FamilySnapshot]:
    return {family.name: family for family in custom.registry.snapshot()}


def request(size: int) -> InferRequest:
    return InferRequest("metered", [Tensor("IN", "FP32", np.zeros(size, np.float32))])


def infer(instance, size: int) -> None:
    (answer,) = instance.execute([request(size)])
    assert isinstance(answer, InferResponse), answer


LABELS = {"model": "metered", "version": "1"}


def test_an_isolated_models_metrics_reach_the_daemons_registry(load) -> None:
    model = load(METERED_MODEL)
    (last,) = families()["iso_last_size"].series
    assert (families()["iso_last_size"].kind, last.labels, last.value) == ("gauge", LABELS, -1)
    for size in (1, 3, 9):
        infer(model.instances[0], size)
    seen = families()
    (requests,) = seen["iso_requests"].series
    assert (seen["iso_requests"].kind, seen["iso_requests"].description) == (
        "counter",
        "Requests seen",
    )
    assert (requests.labels, requests.value) == (LABELS, 3)
    (last,) = seen["iso_last_size"].series
    assert last.value == 9
    (sizes,) = seen["iso_sizes"].series
    assert seen["iso_sizes"].kind == "histogram"
    assert (sizes.labels, sizes.buckets, sizes.counts, sizes.sum) == (
        LABELS,
        (1.0, 4.0),
        (1, 1, 1),
        13,
    )


def test_two_isolated_instances_add_up(load) -> None:
    model = load(METERED_MODEL, instances=2)
    first, second = model.instances
    assert first.pid != second.pid
    infer(first, 2)
    infer(second, 5)
    infer(second, 3)
    seen = families()
    (requests,) = seen["iso_requests"].series
    assert requests.value == 3
    (sizes,) = seen["iso_sizes"].series
    assert (sizes.counts, sizes.sum) == ((0, 2, 1), 10)
    (last,) = seen["iso_last_size"].series
    assert last.value == 3


def test_unloading_an_isolated_model_removes_its_metrics(load) -> None:
    model = load(METERED_MODEL)
    infer(model.instances[0], 2)
    assert {"iso_requests", "iso_last_size", "iso_sizes"} <= set(families())
    model.close()
    gc.collect()
    assert not {"iso_requests", "iso_last_size", "iso_sizes"} & set(families())


def test_an_isolated_model_cannot_grow_the_daemons_metrics_past_the_caps(load) -> None:
    load(
        GREEDY_MODEL.format(
            families=custom.MIRROR_MAX_FAMILIES + 5, series=custom.MIRROR_MAX_SERIES + 5
        ),
        name="greedy",
    )
    greedy = {name: family for name, family in families().items() if name.startswith("greedy_")}
    assert len(greedy) == custom.MIRROR_MAX_FAMILIES
    assert sum(len(family.series) for family in greedy.values()) == custom.MIRROR_MAX_SERIES


def test_a_crashed_process_takes_its_metrics_and_its_restart_begins_afresh(load) -> None:
    model = load(METERED_MODEL)
    instance = model.instances[0]
    infer(instance, 2)
    pid = instance.pid
    (crashed,) = instance.execute([request(13)])
    assert isinstance(crashed, EdgeboxError), crashed
    wait_for(lambda: instance.pid not in (None, pid), timeout_s=30, what="the process restart")
    seen = families()
    (requests,) = seen["iso_requests"].series
    (last,) = seen["iso_last_size"].series
    assert (requests.value, last.value) == (0, -1)
    infer(instance, 4)
    (requests,) = families()["iso_requests"].series
    assert requests.value == 1
