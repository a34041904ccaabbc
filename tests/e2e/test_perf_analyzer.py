"""NVIDIA's perf_analyzer (tritonclient 2.41.0's binary, scripts/perf_analyzer.py)
against the real daemon, as the field test ran it: inputs and outputs in
system shared memory, and 300 concurrent keep-alive connections from one host,
over HTTP and gRPC. Each must finish without an error and every request it sent
must have succeeded (tests/perf_analyzer_runs.py). Skipped, with the reason,
where the binary or a library it links is missing (``make perf-analyzer``
installs them; ``make test`` does). The quick subset: every mode is in
test_perf_analyzer_modes.py (``make test-perf-analyzer``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perf_analyzer_runs import add_simple, checked_run, usable
from scripts.perf_analyzer import DEFAULT_HOME, PerfAnalyzer


@pytest.fixture(scope="module")
def perf_analyzer() -> PerfAnalyzer:
    return usable(PerfAnalyzer(Path(os.environ.get("EDGEBOX_PERF_ANALYZER_HOME", DEFAULT_HOME))))


@pytest.fixture(scope="module")
def repository(repository):
    add_simple(repository)
    return repository


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_shared_memory_system(perf_analyzer, daemon, tmp_path, protocol):
    url = daemon.url if protocol == "http" else daemon.grpc_url
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *("-u", url, "-i", protocol, "--shared-memory", "system", "--concurrency-range", "4"),
    )
    assert [row["Concurrency"] for row in report.rows] == [4]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_300_connections_from_one_host(perf_analyzer, daemon, tmp_path, protocol):
    url = daemon.url if protocol == "http" else daemon.grpc_url
    report = checked_run(
        perf_analyzer,
        daemon,
        "simple",
        tmp_path,
        *("-u", url, "-i", protocol, "--concurrency-range", "300"),
        *("--measurement-mode", "count_windows", "--measurement-request-count", "600"),
    )
    assert [row["Concurrency"] for row in report.rows] == [300]
