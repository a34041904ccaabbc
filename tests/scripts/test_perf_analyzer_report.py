"""Reading perf_analyzer's report (scripts/perf_analyzer.py) without the
binary: the e2e tests and the bench judge runs by these."""

from __future__ import annotations

from scripts.perf_analyzer import client_request_counts, report_rows

SWEEP_CSV = (
    "Concurrency,Inferences/Second,Client Send,p50 latency,p99 latency\n"
    "2,1953.22,61,949,2604\n"
    "1,2095.09,42,453,994\n"
    "\n"
    "Server Metrics,GPU Utilization\n"
    "whatever,0\n"
)


def test_report_rows_are_one_per_load_level_as_numbers(tmp_path):
    path = tmp_path / "report.csv"
    path.write_text(SWEEP_CSV)
    rows = report_rows(path)
    assert [row["Concurrency"] for row in rows] == [2, 1]
    assert rows[1] == {
        "Concurrency": 1,
        "Inferences/Second": 2095.09,
        "Client Send": 42,
        "p50 latency": 453,
        "p99 latency": 994,
    }


def test_client_request_counts_skip_the_server_side_counts():
    output = (
        "Request concurrency: 1\n  Client: \n    Request count: 6301\n"
        "    Throughput: 2095.09 infer/sec\n  Server: \n    Inference count: 6302\n"
        "Request concurrency: 2\n  Client: \n    Request count: 5879\n"
        "    Successful request count: 5884\n"
    )
    assert client_request_counts(output) == [6301, 5879]
