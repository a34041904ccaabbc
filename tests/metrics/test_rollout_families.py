"""The rollout families show a real rollout, driven through a real lifecycle
manager over python models in tmp_path: the stage of each model that had one,
the figures of the one in progress under the new version's number, and the
totals since start as counters. A figure not measured (a canary's agreement)
is left out, not shown as 0."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from daemon_process import wait_for
from edgebox.daemon import Daemon
from edgebox.dashboard.settings import DashboardSettings
from edgebox.metrics.collector import MetricsCollector
from edgebox.settings import Settings
from edgebox.tensors import InferRequest, Tensor
from model_fixtures import PYTHON_XY_CONFIG, PYTHON_XY_IDENTITY, add_python_xy, write_model

DOUBLES_LARGE_X = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = x * 2 if x[0] > 5 else x
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return responses
"""
"""Version 2: agrees with the identity for X[0] <= 5, disagrees above."""

AGREES = (1.0, 2.0)
DISAGREES = (10.0, 2.0)
NEVER_JUDGED = 1000
"""``rollout_samples`` far above what a test sends; no rollout thread runs
either, so a rollout stays in progress until the test decides it."""


def rollout_config(policy: str, extra: str = "") -> str:
    return PYTHON_XY_CONFIG.format(name="m") + (
        f'parameters {{ key: "rollout" value {{ string_value: "{policy}" }} }}\n'
        f'parameters {{ key: "rollout_samples" value {{ string_value: "{NEVER_JUDGED}" }} }}\n'
        + extra
    )


def start_rollout(repository: Path, manager, policy: str, extra: str = "") -> None:
    """Version 1 of ``m`` serving, then version 2 loaded as its candidate."""
    write_model(repository, "m", rollout_config(policy, extra), {"1/model.py": PYTHON_XY_IDENTITY})
    manager.load_model("m")
    write_model(repository, "m", rollout_config(policy, extra), {"2/model.py": DOUBLES_LARGE_X})
    manager.load_model("m")
    assert manager.rollouts.status("m")["stage"] == policy


def infer(dataplane, x: tuple[float, float]) -> None:
    data = np.array(x, dtype=np.float32)
    dataplane.infer(InferRequest("m", [Tensor("X", "FP32", data)]))


def shadow_compared(stack, x: tuple[float, float]) -> None:
    """One request, then wait until its shadow copy is compared: copies run
    on the rollout's own worker (one sent while it is busy could be dropped),
    which counts the sample before it compares the answers."""
    rollouts = stack.manager.rollouts
    before = rollouts.status("m")
    infer(stack.dataplane, x)

    def compared() -> bool:
        now = rollouts.status("m")
        if now["samples"] != before["samples"] + 1:
            return False
        if x == AGREES:
            return now["agreed"] == before["agreed"] + 1
        return bool(now["last_disagreement"])

    wait_for(compared, what="the shadow copy's comparison")


def scrape(rollouts) -> str:
    registry = CollectorRegistry()
    registry.register(MetricsCollector(None, custom=None, rollouts=rollouts))
    return generate_latest(registry).decode()


def series(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, over every family of ``text``."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def totals(found: dict, samples: int, dropped: int = 0, **outcomes: int) -> None:
    """The counters of model ``m``: the given outcomes, 0 for the others."""
    assert found[("edgebox_rollout_samples_total", (("model", "m"),))] == samples
    assert found[("edgebox_rollout_shadow_dropped_total", (("model", "m"),))] == dropped
    for result in ("promoted", "rejected", "rolled_back", "quarantined"):
        key = ("edgebox_rollout_outcomes_total", (("model", "m"), ("result", result)))
        assert found[key] == outcomes.get(result, 0), result


def per_version_names(found: dict) -> set[str]:
    return {name for name, labels in found if ("version", "2") in labels}


def test_a_shadow_rollout_in_progress_shows_its_stage_samples_agreement_and_latencies(
    tmp_path, stack
):
    add_python_xy(tmp_path, "plain")
    stack.manager.load_model("plain")
    start_rollout(tmp_path, stack.manager, "shadow")
    shadow_compared(stack, AGREES)
    shadow_compared(stack, DISAGREES)

    text = scrape(stack.manager.rollouts)

    found = series(text)
    status = stack.manager.rollouts.status("m")
    version = (("model", "m"), ("version", "2"))
    assert 'edgebox_rollout_state{model="m"} 1.0' in text
    assert found[("edgebox_rollout_samples", version)] == 2
    assert found[("edgebox_rollout_agreement", version)] == 0.5
    candidate = found[("edgebox_rollout_candidate_latency_p95_seconds", version)]
    serving = found[("edgebox_rollout_serving_latency_p95_seconds", version)]
    assert candidate == pytest.approx(status["candidate_p95_ms"] / 1000)
    assert serving == pytest.approx(status["serving_p95_ms"] / 1000)
    assert 0 < candidate < 10 and 0 < serving < 10
    totals(found, samples=2)
    # A model that never had a rollout is not listed.
    assert not [key for key in found if ("model", "plain") in key[1]]
    assert "# TYPE edgebox_rollout_outcomes_total counter" in text


def test_a_canary_has_no_agreement_series_and_its_latencies_are_its_own(tmp_path, stack):
    extra = 'parameters { key: "rollout_canary_percent" value { string_value: "50" } }\n'
    start_rollout(tmp_path, stack.manager, "canary", extra)
    # Every second request goes to the canary, so each side answers two.
    for _ in range(4):
        infer(stack.dataplane, AGREES)

    found = series(scrape(stack.manager.rollouts))

    version = (("model", "m"), ("version", "2"))
    assert found[("edgebox_rollout_state", (("model", "m"),))] == 2
    assert found[("edgebox_rollout_samples", version)] == 2
    assert per_version_names(found) == {
        "edgebox_rollout_samples",
        "edgebox_rollout_candidate_latency_p95_seconds",
        "edgebox_rollout_serving_latency_p95_seconds",
    }
    totals(found, samples=2)


def test_an_aborted_rollout_leaves_its_totals_and_a_rejection_but_no_version_series(
    tmp_path, stack
):
    start_rollout(tmp_path, stack.manager, "shadow")
    shadow_compared(stack, AGREES)
    shadow_compared(stack, AGREES)
    shadow_compared(stack, DISAGREES)

    stack.manager.rollouts.abort("m")

    found = series(scrape(stack.manager.rollouts))
    assert found[("edgebox_rollout_state", (("model", "m"),))] == 0
    assert per_version_names(found) == set()
    totals(found, samples=3, rejected=1)


def test_a_promoted_version_is_watched_under_its_number_and_counted_once(tmp_path, stack):
    start_rollout(tmp_path, stack.manager, "shadow")
    shadow_compared(stack, AGREES)

    stack.manager.rollouts.promote("m")
    # Requests during the watch are the promoted version's own, not samples.
    infer(stack.dataplane, AGREES)

    found = series(scrape(stack.manager.rollouts))
    version = (("model", "m"), ("version", "2"))
    assert found[("edgebox_rollout_state", (("model", "m"),))] == 3
    assert found[("edgebox_rollout_samples", version)] == 1
    assert found[("edgebox_rollout_agreement", version)] == 1.0
    totals(found, samples=1, promoted=1)


def test_the_daemon_exports_its_rollouts_on_the_metrics_port(tmp_path):
    repository = tmp_path / "models"
    repository.mkdir()
    settings = Settings(
        model_repository=repository,
        host="127.0.0.1",
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        dashboard=DashboardSettings(enabled=False),
        state_directory=tmp_path / "state",
    )
    daemon = Daemon(settings)
    try:
        start_rollout(repository, daemon.manager, "shadow")
        daemon._start_metrics()
        try:
            url = f"http://127.0.0.1:{daemon.metrics.port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as reply:
                text = reply.read().decode()
        finally:
            daemon.metrics.stop()
    finally:
        daemon.manager.unload_all(timeout_s=10)
    assert 'edgebox_rollout_state{model="m"} 1.0' in text
    assert 'edgebox_rollout_samples{model="m",version="2"} 0.0' in text
