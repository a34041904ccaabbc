"""perf_analyzer runs against a real daemon that must all succeed: the binary
exits 0 with no error in its report, the model's statistics count no failure
and at least as many successes as perf_analyzer measured, and the ``-f``
CSV is read back (tests/e2e/test_perf_analyzer*.py)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon_process import DaemonProcess
from model_fixtures import PYTHON_BACKEND, add_sub_tensors, model_config, write_model
from scripts.perf_analyzer import PerfAnalyzer, client_request_counts, report_rows

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


def add_simple(repository: Path) -> Path:
    return write_model(repository, "simple", SIMPLE_CONFIG, {"1/model.py": SIMPLE_PY})


RUN_TIMEOUT_S = 180
SHORT_WINDOWS = ["-p", "300", "-s", "1000", "-r", "5"]
"""Three 300 ms windows per load level: the tests are about every request
succeeding, not about stable figures on a shared machine, so any spread
counts as stable (``-s 1000``)."""


def usable(analyzer: PerfAnalyzer) -> PerfAnalyzer:
    """``analyzer``, or a skip that names what is missing."""
    reason = analyzer.unusable()
    if reason is not None:
        pytest.skip(reason)
    return analyzer


@dataclass(frozen=True)
class Report:
    output: str
    """perf_analyzer's stdout and stderr."""
    rows: list[dict[str, float]]
    """The CSV, one row per load level."""
    measured: int
    """Requests perf_analyzer counted over every load level."""
    served: dict[str, int]
    """The model's statistics moved by the run: ``success``, ``fail``,
    ``inference_count``, ``execution_count``."""


def model_counts(daemon: DaemonProcess, model: str) -> dict[str, int]:
    url = f"http://{daemon.url}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=10) as reply:
        stats = json.load(reply)["model_stats"]
    return {
        "success": sum(s["inference_stats"]["success"]["count"] for s in stats),
        "fail": sum(s["inference_stats"]["fail"]["count"] for s in stats),
        "inference_count": sum(s["inference_count"] for s in stats),
        "execution_count": sum(s["execution_count"] for s in stats),
    }


def attempt(
    analyzer: PerfAnalyzer, daemon: DaemonProcess, model: str, *args: str
) -> tuple[int, str, dict[str, int]]:
    """One run, whatever its outcome: exit code, report, statistics moved."""
    before = model_counts(daemon, model)
    done = analyzer.run(["-m", model, *SHORT_WINDOWS, *args], RUN_TIMEOUT_S)
    after = model_counts(daemon, model)
    return (
        done.returncode,
        done.stdout + done.stderr,
        {key: after[key] - before[key] for key in after},
    )


def checked_run(
    analyzer: PerfAnalyzer, daemon: DaemonProcess, model: str, folder: Path, *args: str
) -> Report:
    """A run that must succeed in full; fails with perf_analyzer's report
    when it does not."""
    csv_path = folder / f"{model}-{len(list(folder.glob('*.csv')))}.csv"
    code, output, served = attempt(analyzer, daemon, model, *args, "-f", str(csv_path))
    assert code == 0, f"perf_analyzer exited with {code}:\n{output}"
    assert "error" not in output.lower(), output
    measured = sum(client_request_counts(output))
    assert measured > 0, output
    assert served["fail"] == 0, (served, output)
    assert served["success"] >= measured, (served, output)
    return Report(output, report_rows(csv_path), measured, served)
