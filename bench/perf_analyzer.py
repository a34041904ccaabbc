"""Issue 22: NVIDIA's perf_analyzer as a load driver beside the bench's own,
the same command against edgebox and against a real Triton 2.51, on copies
of one repository (``bench/out/perf_analyzer/``).

The model is Triton's ``simple`` (INT32 sum and difference, a python model:
the reference Triton from PyPI's ``nvidia-pytriton`` has no ONNX Runtime
backend, tests/perf_analyzer_runs.py). Cells: HTTP and gRPC at concurrency
1 and 8, gRPC streaming at 8, and HTTP with system shared memory at 1. Every
cell but the shared-memory one sends real data whose answers perf_analyzer
checks (``validation_data``); every run must exit 0 with no error. The
``cache hits`` cells send the same data to ``simple_cached`` (``simple`` with
``response_cache { enable: true }``) on servers started with
``--cache-config local,size=CACHE_BYTES``: after the first request every one
is answered from Triton's response cache (edgebox's own, issue 22), so they
measure the hit path against Triton's, and against edgebox running ``simple``.

Rounds are interleaved: each round runs every (cell, server) once, the order
rotated each round; each run is perf_analyzer's own measurement (three
windows of ``window_ms``, its p50 and p99 over them). Figures are medians
over rounds; each ratio is the median of per-round edgebox / Triton ratios,
Triton being the floor measured in the same round. Targets, as issue 2's:
at concurrency 1, p50 edgebox / Triton <= ``P50_TARGET``; at 8, requests/s
edgebox / Triton >= ``RATE_TARGET``. Where the reference Triton is not installed (``make
test-parity`` installs it into ``.parity/``) edgebox's figures are reported
alone, with no target.
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from daemon_process import DaemonProcess, wait_for
from model_fixtures import write_model
from perf_analyzer_runs import SIMPLE_CONFIG, SIMPLE_PY, add_simple
from scripts.perf_analyzer import PerfAnalyzer, report_rows
from scripts.triton_reference import Reference

P50_TARGET = 1.5
RATE_TARGET = 0.67
RUN_TIMEOUT_S = 120
CACHE_BYTES = 16 * 1024 * 1024
CACHE_FLAGS = ("--cache-config", f"local,size={CACHE_BYTES}")
METRICS = ("Inferences/Second", "p50 latency", "p99 latency")

VALUES = list(range(-8, 8))
DATA = {
    "data": [{"INPUT0": VALUES, "INPUT1": VALUES[::-1]}],
    "validation_data": [
        {
            "OUTPUT0": [a + b for a, b in zip(VALUES, VALUES[::-1], strict=True)],
            "OUTPUT1": [a - b for a, b in zip(VALUES, VALUES[::-1], strict=True)],
        }
    ],
}


@dataclass(frozen=True)
class Cell:
    label: str
    protocol: str
    concurrency: int
    flags: tuple[str, ...] = ()
    validated: bool = True
    model: str = "simple"


CELLS = (
    Cell("http c=1", "http", 1),
    Cell("http c=8", "http", 8),
    Cell("grpc c=1", "grpc", 1),
    Cell("grpc c=8", "grpc", 8),
    Cell("grpc streaming c=8", "grpc", 8, ("--streaming",)),
    Cell("http shm c=1", "http", 1, ("--shared-memory", "system"), validated=False),
    Cell("http c=1 cache hits", "http", 1, model="simple_cached"),
    Cell("grpc c=1 cache hits", "grpc", 1, model="simple_cached"),
)


@dataclass(frozen=True)
class Server:
    name: str
    http: str
    grpc: str


@dataclass
class Runs:
    """One (cell, server)'s CSV row per round."""

    rows: list[dict[str, float]] = field(default_factory=list)

    def median(self, metric: str) -> float:
        return statistics.median(row[metric] for row in self.rows)


def measure(
    folder: Path,
    analyzer: PerfAnalyzer,
    reference: Reference,
    rounds: int,
    window_ms: int,
    log: Callable[[str], None] = print,
) -> tuple[dict, list]:
    """Returns (figures for results.json, targets as (name, passed, text,
    ratio)). Logs: ``folder/daemon.log``, ``folder/triton.log``."""
    reason = analyzer.unusable()
    if reason is not None:
        log(f"  skipped: {reason}")
        return {"skipped": reason}, []
    if folder.exists():
        shutil.rmtree(folder)
    source = folder / "source"
    add_simple(source)
    cached = SIMPLE_CONFIG.replace('name: "simple"', 'name: "simple_cached"')
    write_model(
        source,
        "simple_cached",
        cached + "response_cache { enable: true }\n",
        {"1/model.py": SIMPLE_PY},
    )
    data = folder / "data.json"
    data.write_text(json.dumps(DATA))
    shutil.copytree(source, folder / "edgebox")
    daemon = DaemonProcess(folder / "edgebox", folder / "daemon.log", list(CACHE_FLAGS))
    triton = None
    try:
        daemon.start()
        servers = [Server("edgebox", daemon.url, daemon.grpc_url)]
        if reference.installed():
            shutil.copytree(source, folder / "triton")
            triton, server = _launch(reference, folder)
            servers.append(server)
        else:
            log(f"  no reference Triton in {reference.home} (make test-parity): edgebox alone")
        runs = {(c.label, s.name): Runs() for c in CELLS for s in servers}
        order = [(c, s) for c in CELLS for s in servers]
        for index in range(rounds):
            shift = index % len(order)
            for cell, server in order[shift:] + order[:shift]:
                row = _run(analyzer, cell, server, data, window_ms, folder / "report.csv")
                runs[(cell.label, server.name)].rows.append(row)
            log(
                f"  round {index + 1}/{rounds} p50 us ({'/'.join(s.name for s in servers)}): "
                + ", ".join(_round_p50(runs, c, servers) for c in CELLS)
            )
    finally:
        if triton is not None:
            triton.terminate()
            triton.wait(30)
        code = daemon.stop()
        if code != 0:
            log(f"  daemon exited with {code}; see {daemon.log_path}")
    return _report([s.name for s in servers], runs, log)


def _round_p50(runs: dict, cell: Cell, servers: list[Server]) -> str:
    return f"{cell.label} " + "/".join(
        f"{runs[(cell.label, s.name)].rows[-1]['p50 latency']:.0f}" for s in servers
    )


def _launch(reference: Reference, folder: Path) -> tuple[subprocess.Popen, Server]:
    http, grpc, metrics = _free_port(), _free_port(), _free_port()
    process = reference.launch(
        folder / "triton", http, grpc, metrics, folder / "triton.log", CACHE_FLAGS
    )
    server = Server("triton", f"127.0.0.1:{http}", f"127.0.0.1:{grpc}")
    try:
        wait_for(lambda: process.poll() is None and _ready(server.http), 90, what="Triton")
    except AssertionError:
        process.terminate()
        raise
    return process, server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _run(
    analyzer: PerfAnalyzer, cell: Cell, server: Server, data: Path, window_ms: int, csv: Path
) -> dict[str, float]:
    """perf_analyzer's row for one run; raises with its report when a request
    failed or an answer was wrong."""
    url = server.http if cell.protocol == "http" else server.grpc
    args = ["-m", cell.model, "-u", url, "-i", cell.protocol, *cell.flags]
    args += ["--concurrency-range", str(cell.concurrency), "-p", str(window_ms)]
    args += ["-s", "1000", "-r", "5", "-f", str(csv)]
    args += ["--input-data", str(data)] if cell.validated else []
    done = analyzer.run(args, RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    if done.returncode != 0 or "error" in output.lower():
        raise RuntimeError(f"perf_analyzer {cell.label} against {server.name}:\n{output}")
    (row,) = report_rows(csv)
    return {metric: row[metric] for metric in METRICS}


def _report(names: list[str], runs: dict[tuple[str, str], Runs], log) -> tuple[dict, list]:
    figures: dict = {}
    targets = []
    log(f"\n{'cell':<20}{'server':<9}{'per s':>9}{'p50 us':>9}{'p99 us':>9}")
    for cell in CELLS:
        entry = {}
        for name in names:
            mine = runs[(cell.label, name)]
            entry[name] = {
                "per_s": round(mine.median("Inferences/Second"), 1),
                "p50_us": mine.median("p50 latency"),
                "p99_us": mine.median("p99 latency"),
            }
            log(
                f"{cell.label:<20}{name:<9}{entry[name]['per_s']:>9.0f}"
                f"{entry[name]['p50_us']:>9.0f}{entry[name]['p99_us']:>9.0f}"
            )
        if "triton" in names:
            ratios = {
                key: _paired(runs[(cell.label, "edgebox")], runs[(cell.label, "triton")], metric)
                for key, metric in zip(("per_s", "p50", "p99"), METRICS, strict=True)
            }
            entry["edgebox_over_triton"] = {k: round(v, 3) for k, v in ratios.items()}
            targets.append(_target(cell, entry, ratios))
        figures[cell.label] = entry
    figures["cache_hit_over_run"] = {}
    for protocol in ("http", "grpc"):
        hits, runs_ = (
            runs[(f"{protocol} c=1 cache hits", "edgebox")],
            runs[(f"{protocol} c=1", "edgebox")],
        )
        ratio = _paired(hits, runs_, "p50 latency")
        figures["cache_hit_over_run"][protocol] = round(ratio, 3)
        log(f"edgebox {protocol} c=1: p50 of a cache hit / of running simple = {ratio:.2f}")
    if "triton" in names:
        log("ratios: median over rounds of edgebox / Triton in the same round")
        for cell in CELLS:
            r = figures[cell.label]["edgebox_over_triton"]
            log(
                f"  {cell.label:<20} per s {r['per_s']:.2f}, p50 {r['p50']:.2f}, p99 {r['p99']:.2f}"
            )
    return figures, targets


def _paired(edgebox: Runs, triton: Runs, metric: str) -> float:
    return statistics.median(
        e[metric] / t[metric] for e, t in zip(edgebox.rows, triton.rows, strict=True)
    )


def _target(cell: Cell, entry: dict, ratios: dict[str, float]) -> tuple:
    """Latency at concurrency 1, throughput at 8, as the issue 2 targets."""
    mine, floor = entry["edgebox"], entry["triton"]
    if cell.concurrency == 1:
        return (
            f"perf_analyzer {cell.label}: edgebox p50 <= {P50_TARGET} x Triton 2.51 p50",
            ratios["p50"] <= P50_TARGET,
            f"{mine['p50_us']:.0f} vs {floor['p50_us']:.0f} us (median per-round ratio "
            f"{ratios['p50']:.2f}, needs <= {P50_TARGET}; p99 ratio {ratios['p99']:.2f})",
            round(ratios["p50"] / P50_TARGET, 3),
        )
    return (
        f"perf_analyzer {cell.label}: edgebox requests/s >= {RATE_TARGET} x Triton 2.51's",
        ratios["per_s"] >= RATE_TARGET,
        f"{mine['per_s']:.0f} vs {floor['per_s']:.0f}/s (median per-round ratio "
        f"{ratios['per_s']:.2f}, needs >= {RATE_TARGET}; p99 ratio {ratios['p99']:.2f})",
        round(ratios["per_s"] / RATE_TARGET, 3),
    )
