"""``triton_answers.FAILURE_COUNTS`` checked against the reference Triton:
each request of ``parity_repository.FAILURE_REQUESTS`` adds what the table says
to the model's ``/v2/models/M/stats``. Triton updates its statistics after it
has answered, so each check waits for the expected counts (a deadline, then
the counts it saw); a count that arrives late for a case shows in the next
case of the same model."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from daemon_process import wait_for
from parity_repository import FAILURE_REQUESTS
from triton_answers import FAILURE_COUNTS


def counts(url: str, model: str) -> tuple[int, int, int, int]:
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=10) as reply:
        stats = json.load(reply)["model_stats"][0]
    return (
        stats["inference_stats"]["success"]["count"],
        stats["inference_stats"]["fail"]["count"],
        stats["inference_count"],
        stats["execution_count"],
    )


def post(url: str, model: str, payload: bytes) -> None:
    request = urllib.request.Request(
        f"http://{url}/v2/models/{model}/infer", data=payload, method="POST"
    )
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as error:
        error.close()


def test_triton_counts_each_request_as_pinned(triton):
    seen = {}
    for case, (model, payload) in FAILURE_REQUESTS.items():
        before = counts(triton, model)
        post(triton, model, payload)
        expected = tuple(b + d for b, d in zip(before, FAILURE_COUNTS[case], strict=True))
        try:
            wait_for(lambda m=model, e=expected: counts(triton, m) == e, 10, what=case)
        except AssertionError:
            seen[case] = tuple(a - b for a, b in zip(counts(triton, model), before, strict=True))
    assert not seen, f"Triton counted (success, fail, inferences, executions): {seen}"
