"""NVIDIA's perf_analyzer (scripts/perf_analyzer.py) against the real daemon
in each of its usual modes: HTTP and gRPC, sync, async and gRPC streaming
(a decoupled model included), system shared memory, batches over one,
sequence models, request-rate and interval schedules, concurrency sweeps,
its CSV report, and real input data whose answers perf_analyzer checks
(``validation_data``), not only counts. Every run must finish with every
request a success (tests/perf_analyzer_runs.py).

Opt-in, since it takes a few minutes: ``make test-perf-analyzer`` (or
``EDGEBOX_PERF_ANALYZER=1``). ``make test`` keeps the quick subset in
tests/e2e/test_perf_analyzer.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from edgebox.protocol.http.shared_memory_ext import CUDA_UNSUPPORTED
from edgebox.responses import UNARY_REFUSAL_HTTP
from model_fixtures import add_decoupled_repeat, write_model
from perf_analyzer_runs import add_simple, attempt, checked_run, usable
from scripts.perf_analyzer import DEFAULT_HOME, PerfAnalyzer

pytestmark = pytest.mark.skipif(
    os.environ.get("EDGEBOX_PERF_ANALYZER") != "1",
    reason="opt-in: make test-perf-analyzer (or EDGEBOX_PERF_ANALYZER=1)",
)

ACCUMULATE_CONFIG = """
name: "accumulate"
backend: "python"
max_batch_size: 4
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 8 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
ACCUMULATE_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _flag(request, name):
    return bool(pb_utils.get_input_tensor_by_name(request, name).as_numpy().flat[0])


class TritonPythonModel:
    \"\"\"OUTPUT is the sum of INPUT over the sequence so far. The data the
    tests send counts up within a sequence, so a request handed to another
    sequence's state, out of order, or without its START gets an error
    response, which fails the perf_analyzer run. A START begins afresh, as
    in Triton, whether or not the id's last sequence ended. An END may skip
    ahead: perf_analyzer closes the sequences a run cuts short with one END
    request carrying the stream's last step (Triton 2.51 sees the same).\"\"\"

    def initialize(self, args):
        self.open = {}

    def execute(self, requests):
        return [self.answer(request) for request in requests]

    def answer(self, request):
        key = request.correlation_id()
        x = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().flat[0])
        if _flag(request, "START"):
            last, total = x - 1, 0
        elif key not in self.open:
            return self.refuse(f"sequence {key}: {x} without a START")
        else:
            last, total = self.open[key]
        end = _flag(request, "END")
        if x != last + 1 and not (end and x > last):
            return self.refuse(f"sequence {key}: {x} after {last}")
        total += x
        if end:
            del self.open[key]
        else:
            self.open[key] = (x, total)
        out = np.array([[total]], np.int32)
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)])

    def refuse(self, message):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))
"""
"""A sequence model that checks, request by request, what the sequence
batcher hands it. perf_analyzer's own output validation cannot do it for
sequences: tritonclient 2.41.0's perf_analyzer reports 'Output doesn't
match expected output' for correct answers from Triton 2.51 as from
edgebox once sequences run side by side."""

ADD = [3, -1, 4, 1, -5, 9, 2, -6, 5, 3, -5, 8, 9, -7, 9, 3]
SUB = [2, 7, -1, 8, 2, -8, 1, 8, 2, -8, 4, 5, 9, 0, 4, 5]
SIMPLE_DATA = {
    "data": [{"INPUT0": ADD, "INPUT1": SUB}, {"INPUT0": SUB, "INPUT1": ADD}],
    "validation_data": [
        {
            "OUTPUT0": [a + b for a, b in zip(ADD, SUB, strict=True)],
            "OUTPUT1": [a - b for a, b in zip(ADD, SUB, strict=True)],
        },
        {
            "OUTPUT0": [b + a for a, b in zip(ADD, SUB, strict=True)],
            "OUTPUT1": [b - a for a, b in zip(ADD, SUB, strict=True)],
        },
    ],
}
"""Two steps of real data with the sum and difference perf_analyzer must get
back for each."""


def counting_streams(*lengths: int, first: int = 1) -> dict:
    """perf_analyzer input data: one stream (a sequence) per length, each
    step's INPUT one more than the last."""
    return {"data": [[{"INPUT": [first + step]} for step in range(length)] for length in lengths]}


REPEAT_VALUES = [4, 5, 6]

MODES = {
    "http-sync": ("http", "--sync"),
    "http-async": ("http", "--async"),
    "grpc-sync": ("grpc", "--sync"),
    "grpc-async": ("grpc", "--async"),
    "grpc-streaming": ("grpc", "--streaming"),
}


@pytest.fixture(scope="module")
def perf_analyzer() -> PerfAnalyzer:
    return usable(PerfAnalyzer(Path(os.environ.get("EDGEBOX_PERF_ANALYZER_HOME", DEFAULT_HOME))))


@pytest.fixture(scope="module")
def repository(repository):
    add_simple(repository)
    write_model(repository, "accumulate", ACCUMULATE_CONFIG, {"1/model.py": ACCUMULATE_PY})
    add_decoupled_repeat(repository)
    return repository


def data_file(folder: Path, document: dict, name: str = "data.json") -> str:
    path = folder / name
    path.write_text(json.dumps(document))
    return str(path)


def endpoint(daemon, mode: str) -> list[str]:
    protocol, flag = MODES[mode]
    url = daemon.url if protocol == "http" else daemon.grpc_url
    return ["-u", url, "-i", protocol, flag]


@pytest.mark.parametrize("mode", MODES)
def test_real_data_answers_are_validated_in_every_mode(perf_analyzer, daemon, tmp_path, mode):
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, mode),
        *("--input-data", data_file(tmp_path, SIMPLE_DATA), "--concurrency-range", "2"),
    )
    assert [row["Concurrency"] for row in report.rows] == [2]
    assert report.rows[0]["Inferences/Second"] > 0


def test_a_wrong_answer_fails_the_run(perf_analyzer, daemon, tmp_path):
    """The validation above is live: data whose expected sum is off by one
    makes perf_analyzer stop on the first answer."""
    wrong = json.loads(json.dumps(SIMPLE_DATA))
    wrong["validation_data"][1]["OUTPUT0"][7] += 1
    code, output, served = attempt(
        perf_analyzer,
        daemon,
        "simple",
        *endpoint(daemon, "http-sync"),
        *("--input-data", data_file(tmp_path, wrong)),
    )
    assert code != 0, output
    assert "Output doesn't match expected output" in output
    assert served["fail"] == 0


@pytest.mark.parametrize(("mode", "batch"), [("http-sync", 4), ("grpc-async", 8)])
def test_batches_over_one_are_validated(perf_analyzer, daemon, tmp_path, mode, batch):
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, mode),
        *("-b", str(batch), "--input-data", data_file(tmp_path, SIMPLE_DATA)),
    )
    assert report.served["inference_count"] == batch * report.served["success"]


@pytest.mark.parametrize("mode", MODES)
def test_system_shared_memory_in_every_mode(perf_analyzer, daemon, tmp_path, mode):
    """Random data: perf_analyzer validates answers from the response body,
    which shared memory leaves empty (its own limit: real data with
    validation and ``--shared-memory`` fail with 'Output size doesn't match
    expected size' against Triton too). tests/parity/ checks the answers."""
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, mode),
        *("--shared-memory", "system", "--output-shared-memory-size", "64"),
    )
    assert report.rows[0]["Inferences/Second"] > 0


@pytest.mark.skipif(
    not Path("/dev/nvidiactl").exists(),
    reason="no CUDA device: perf_analyzer's --shared-memory cuda fails in its own "
    "cudaMalloc ('CUDA driver version is insufficient for CUDA runtime version') "
    "before it reaches the server",
)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_cuda_shared_memory_is_refused_with_the_reason(perf_analyzer, daemon, tmp_path, protocol):
    url = daemon.url if protocol == "http" else daemon.grpc_url
    code, output, _ = attempt(
        perf_analyzer,
        daemon,
        "simple",
        *("-u", url, "-i", protocol, "--shared-memory", "cuda"),
    )
    assert code != 0, output
    assert CUDA_UNSUPPORTED.split(";")[0] in output


@pytest.mark.parametrize("mode", ["http-sync", "grpc-async", "grpc-streaming"])
def test_sequences_keep_their_own_state(perf_analyzer, daemon, tmp_path, mode):
    """Four sequences of their own lengths at once; the model refuses any
    request that reaches it out of its sequence's order."""
    report = checked_run(
        perf_analyzer,
        daemon,
        "accumulate",
        tmp_path,
        *endpoint(daemon, mode),
        *("--input-data", data_file(tmp_path, counting_streams(3, 5, 2, 4))),
        *("--sequence-id-range", "1:1000", "--concurrency-range", "4"),
    )
    assert re.search(r"Sequence count: [1-9]", report.output), report.output


@pytest.mark.parametrize("mode", ["http-async", "grpc-streaming"])
def test_sequences_of_random_length(perf_analyzer, daemon, tmp_path, mode):
    """``--sequence-length`` 6 +/- 50%: one stream longer than any of them,
    which perf_analyzer walks in order from wherever it starts."""
    report = checked_run(
        perf_analyzer,
        daemon,
        "accumulate",
        tmp_path,
        *endpoint(daemon, mode),
        *("--input-data", data_file(tmp_path, counting_streams(12))),
        *("--sequence-length", "6", "--sequence-length-variation", "50"),
        *("--sequence-id-range", "5000:6000", "--concurrency-range", "3"),
    )
    assert re.search(r"Sequence count: [1-9]", report.output), report.output


def test_sequences_at_a_request_rate(perf_analyzer, daemon, tmp_path):
    report = checked_run(
        perf_analyzer,
        daemon,
        "accumulate",
        tmp_path,
        *endpoint(daemon, "grpc-streaming"),
        *("--input-data", data_file(tmp_path, counting_streams(3, 5, 2, 4))),
        *("--request-rate-range", "100", "--num-of-sequences", "4"),
    )
    assert [row["Request Rate"] for row in report.rows] == [100]


@pytest.mark.parametrize("mode", ["http-sync", "grpc-async"])
def test_request_rate_sweep(perf_analyzer, daemon, tmp_path, mode):
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, mode),
        *("--input-data", data_file(tmp_path, SIMPLE_DATA)),
        *("--request-rate-range", "50:150:50", "--request-distribution", "poisson"),
    )
    assert sorted(row["Request Rate"] for row in report.rows) == [50, 100, 150]


def test_request_intervals_from_a_file(perf_analyzer, daemon, tmp_path):
    intervals_us = [2000, 5000, 3000]
    schedule = tmp_path / "intervals.txt"
    schedule.write_text("".join(f"{us}\n" for us in intervals_us))
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, "grpc-sync"),
        *("--input-data", data_file(tmp_path, SIMPLE_DATA)),
        *("--request-intervals", str(schedule)),
    )
    mean_us = sum(intervals_us) / len(intervals_us)
    assert [row["Request Rate"] for row in report.rows] == [int(1e6 / mean_us)]


@pytest.mark.parametrize("mode", ["http-sync", "grpc-async"])
def test_concurrency_sweep(perf_analyzer, daemon, tmp_path, mode):
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *endpoint(daemon, mode),
        *("--input-data", data_file(tmp_path, SIMPLE_DATA)),
        *("--concurrency-range", "1:4:1"),
    )
    assert sorted(row["Concurrency"] for row in report.rows) == [1, 2, 3, 4]
    for row in report.rows:
        assert row["Inferences/Second"] > 0
        assert 0 < row["p50 latency"] <= row["p99 latency"]


def test_decoupled_model_streams_every_response(perf_analyzer, daemon, tmp_path):
    """perf_analyzer measures a decoupled model through its stream; each
    request is answered with one response per element of IN."""
    report = checked_run(
        perf_analyzer,
        daemon,
        "repeat",
        tmp_path,
        *endpoint(daemon, "grpc-streaming"),
        *("--input-data", data_file(tmp_path, {"data": [{"IN": REPEAT_VALUES}]})),
        *("--shape", f"IN:{len(REPEAT_VALUES)}", "--concurrency-range", "2"),
    )
    (row,) = report.rows
    responses_per_request = row["Response Throughput"] / row["Inferences/Second"]
    assert responses_per_request == pytest.approx(len(REPEAT_VALUES), rel=0.05)


def test_decoupled_model_over_http_is_refused_as_triton_does(perf_analyzer, daemon, tmp_path):
    code, output, served = attempt(
        perf_analyzer,
        daemon,
        "repeat",
        *endpoint(daemon, "http-sync"),
        *("--input-data", data_file(tmp_path, {"data": [{"IN": REPEAT_VALUES}]})),
        *("--shape", f"IN:{len(REPEAT_VALUES)}"),
    )
    assert code != 0, output
    assert UNARY_REFUSAL_HTTP in output
    assert served["success"] == 0
