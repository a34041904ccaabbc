"""What a request counts in ``/v2/models/M/stats`` and in Triton's
``nv_inference_request_success`` / ``nv_inference_request_failure``, request by
request, against the daemon, as Triton 2.51 counts it
(``triton_answers.FAILURE_COUNTS``): a request refused before the model saw it
(a wrong shape or datatype, an unknown or missing input...) is neither a
success nor a failure; a failure is the model's (an ``execute`` that raised)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from daemon_process import DaemonProcess
from parity_repository import FAILURE_REQUESTS, write_parity_repository
from triton_answers import FAILURE_COUNTS

DELIBERATE = {
    "ensemble step answers an error": (
        (0, 1, 0, 0),
        "one failed request is one failure; Triton 2.51 counts two on the ensemble",
    ),
}
"""Case -> (edgebox's counts, why they differ from Triton's)."""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("failure-counts")
    repository = write_parity_repository(root / "repo")
    with DaemonProcess(repository, root / "daemon.log", []) as process:
        yield process


def counts(daemon: DaemonProcess, model: str) -> tuple[int, ...]:
    """(success, fail, inference_count, execution_count) from the statistics,
    then (success, failure) from the metrics."""
    with urllib.request.urlopen(f"http://{daemon.url}/v2/models/{model}/stats") as reply:
        stats = json.load(reply)["model_stats"][0]
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics") as reply:
        metrics = reply.read().decode()

    def metric(name: str) -> int:
        pattern = rf'^{name}\{{model="{model}",version="1"\}} (\S+)$'
        return int(float(re.search(pattern, metrics, re.MULTILINE).group(1)))

    return (
        stats["inference_stats"]["success"]["count"],
        stats["inference_stats"]["fail"]["count"],
        stats["inference_count"],
        stats["execution_count"],
        metric("nv_inference_request_success"),
        metric("nv_inference_request_failure"),
    )


@pytest.mark.parametrize("case", list(FAILURE_COUNTS))
def test_a_request_counts_as_triton_counts_it(daemon, case):
    model, payload = FAILURE_REQUESTS[case]
    before = counts(daemon, model)
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/models/{model}/infer", data=payload, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status = reply.status
    except urllib.error.HTTPError as error:
        status = error.code
    delta = tuple(a - b for a, b in zip(counts(daemon, model), before, strict=True))
    success, fail, inferences, executions = DELIBERATE.get(case, (FAILURE_COUNTS[case],))[0]
    assert (status == 200) == (case == "valid")
    assert delta == (success, fail, inferences, executions, success, fail)
