"""Issue 25: edgebox against a real Triton 2.51 on the same python models,
the same ``tritonclient`` load, rows alternating within each round.

The reference Triton from PyPI's ``nvidia-pytriton`` (``make test-parity``
puts it in ``.parity/``) has the python backend but no ONNX Runtime one, so
both servers run the same two Triton ``model.py`` files:

- ``add_sub``: two [1, 16] FP32 tensors in, their sum and difference out, all
  overhead: what the transport and the server cost a request;
- ``lane``: the lane detector's shapes, a [1, 3, 360, 640] FP32 image in
  (2.7 MB) and [1, 2784, 77] out (0.8 MB), computed from the image by numpy:
  what moving a camera frame through the server costs.

Rows: HTTP (binary tensors) and gRPC, concurrency 1 and 8, each client
thread with its own connection (``bench/transports.py``'s loops). Every round
runs every (row, server) once, the order rotated each round; each ratio is
the median of the per-round ``edgebox / Triton`` requests/s (Triton is the
floor measured in the same round). Server CPU per request is each process's
(and, for Triton, its python stubs') user+system time over the calls.
Target: every row at least ``RATE_TARGET`` times Triton's requests/s.

A third server, ``floor`` (``bench/python_floor.py``), is the least a Python
server spends on these rows: its ratio to Triton, reported beside edgebox's,
is how far any Python front end could get on this machine in the same run.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.cpu_time import process_cpu_s
from bench.latency import Round
from bench.perf_analyzer import _free_port, _ready
from bench.transports import TRANSPORTS, Transport, _loop
from bench.workload import Workload
from daemon_process import DaemonProcess, wait_for
from scripts.triton_reference import Reference

RATE_TARGET = 1.5
REPO_ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (1, 8)
LANE_IN = (1, 3, 360, 640)
LANE_OUT = (1, 2784, 77)

ADD_SUB_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
"""

LANE_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils

SIZE = 2784 * 77


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "input").as_numpy()
            lanes = (image.reshape(-1)[:SIZE] * 2.0).reshape(1, 2784, 77)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("predict_lanes", lanes.astype(np.float32))]))
        return responses
"""


def _config(name: str, inputs: list[tuple[str, tuple]], outputs: list[tuple[str, tuple]]) -> str:
    def tensors(kind: str, items: list[tuple[str, tuple]]) -> str:
        rows = ",\n".join(
            f'  {{ name: "{n}" data_type: TYPE_FP32 dims: [ {", ".join(map(str, dims[1:]))} ] }}'
            for n, dims in items
        )
        return f"{kind} [\n{rows}\n]\n"

    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        + tensors("input", inputs)
        + tensors("output", outputs)
        + "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
    )


def write_repository(root: Path) -> dict[str, Workload]:
    if root.exists():
        shutil.rmtree(root)
    models = {
        "add_sub": (
            ADD_SUB_PY,
            [("INPUT0", (1, 16)), ("INPUT1", (1, 16))],
            [("OUTPUT0", (1, 16)), ("OUTPUT1", (1, 16))],
        ),
        "lane": (LANE_PY, [("input", LANE_IN)], [("predict_lanes", LANE_OUT)]),
    }
    for name, (code, inputs, outputs) in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(code)
        (root / name / "config.pbtxt").write_text(_config(name, inputs, outputs))
    image = np.random.default_rng(7).random(LANE_IN, dtype=np.float32)
    pattern = np.arange(16, dtype=np.float32).reshape(1, 16)
    return {
        "add_sub": Workload(
            "add_sub",
            root / "add_sub" / "1" / "model.py",
            {"INPUT0": pattern, "INPUT1": np.ones((1, 16), dtype=np.float32)},
            ["OUTPUT0", "OUTPUT1"],
        ),
        "lane": Workload(
            "lane", root / "lane" / "1" / "model.py", {"input": image}, ["predict_lanes"]
        ),
    }


def expected_outputs(workload: Workload) -> list[np.ndarray]:
    if workload.name == "add_sub":
        a, b = workload.feeds["INPUT0"], workload.feeds["INPUT1"]
        return [a + b, a - b]
    image = workload.feeds["input"]
    return [(image.reshape(-1)[: 2784 * 77] * 2.0).reshape(LANE_OUT)]


@dataclass
class Server:
    name: str
    http: str
    grpc: str
    pids: Callable[[], list[int]]
    """The server's processes (Triton's python stubs are processes of their own)."""


@dataclass
class Row:
    model: str
    transport: Transport
    concurrency: int
    seconds: float
    rounds: dict[str, list[Round]] = field(default_factory=dict)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.model} {self.transport.name} c={self.concurrency}"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if int(parent) == pid:
            found.append(int(entry.name))
    return found


def _cpu_s(pids: list[int]) -> float:
    return sum(process_cpu_s(pid) or 0.0 for pid in pids)


def _check(server: Server, transport: Transport, workload: Workload) -> None:
    url = server.http if transport.protocol == "http" else server.grpc
    client = transport.open(url, workload)
    try:
        got = client.outputs(client.infer())
    finally:
        client.close()
    for have, want in zip(got, expected_outputs(workload), strict=True):
        if have is None or not np.allclose(have, want):
            raise AssertionError(f"{server.name} {transport.name}: wrong '{workload.name}' answer")


def measure(
    folder: Path,
    reference: Reference,
    rounds: int,
    seconds: float,
    log: Callable[[str], None],
) -> tuple[dict, list[tuple]]:
    """The table and the targets as ``(name, passed, text, ratio)``; edgebox
    alone, with no target, where the reference Triton is not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    workloads = write_repository(folder / "models")
    shutil.copytree(folder / "models", folder / "triton-models", dirs_exist_ok=True)
    daemon = DaemonProcess(folder / "models", folder / "edgebox.log", [])
    daemon.start()
    triton = floor = None
    servers = [
        Server("edgebox", daemon.url, daemon.grpc_url, lambda: [daemon.process.pid]),
    ]
    try:
        if reference.installed():
            http, grpc, metrics = _free_port(), _free_port(), _free_port()
            triton = reference.launch(
                folder / "triton-models", http, grpc, metrics, folder / "triton.log"
            )
            servers.append(
                Server(
                    "triton",
                    f"127.0.0.1:{http}",
                    f"127.0.0.1:{grpc}",
                    lambda: [triton.pid, *_children(triton.pid)],
                )
            )
            wait_for(lambda: triton.poll() is None and _ready(servers[1].http), 120, what="Triton")
        else:
            log(f"  no reference Triton in {reference.home} (make test-parity): edgebox alone")
        floor_http, floor_grpc = _free_port(), _free_port()
        floor = subprocess.Popen(
            [sys.executable, "-m", "bench.python_floor", str(floor_http), str(floor_grpc)],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "floor.log").open("wb"),
        )
        servers.append(
            Server(
                "floor",
                f"127.0.0.1:{floor_http}",
                f"127.0.0.1:{floor_grpc}",
                lambda: [floor.pid],
            )
        )
        wait_for(lambda: floor.poll() is None and _ready(servers[-1].http), 60, what="the floor")
        transports = [t for t in TRANSPORTS if not t.shared_memory]
        rows = [
            Row(model, transport, c, seconds * (2.0 if model == "lane" else 1.0))
            for model in workloads
            for transport in transports
            for c in CONCURRENCY
        ]
        for server in servers:
            for transport in transports:
                for workload in workloads.values():
                    _check(server, transport, workload)
        runs = {
            (row.label, server.name): _loop(
                row.transport,
                server.http if row.transport.protocol == "http" else server.grpc,
                workloads[row.model],
                row.concurrency,
            )
            for row in rows
            for server in servers
        }
        for run in runs.values():
            run(0.3)
        order = [(row, server) for row in rows for server in servers]
        for index in range(rounds):
            shift = index % len(order)
            for row, server in order[shift:] + order[:shift]:
                pids = server.pids()
                before = _cpu_s(pids)
                result = runs[(row.label, server.name)](row.seconds)
                spent = _cpu_s(pids) - before
                row.rounds.setdefault(server.name, []).append(result)
                row.cpu_us.setdefault(server.name, []).append(spent / result.calls * 1e6)
            log(
                f"  round {index + 1}/{rounds} req/s ({'/'.join(s.name for s in servers)}): "
                + ", ".join(
                    f"{row.label} "
                    + "/".join(f"{row.rounds[s.name][-1].rate_per_s:.0f}" for s in servers)
                    for row in rows
                )
            )
        rss_mb = {s.name: _rss_bytes(s.pids()) / 2**20 for s in servers}
    finally:
        if floor is not None:
            floor.kill()
            floor.wait()
        if triton is not None:
            triton.terminate()
            try:
                triton.wait(30)
            except subprocess.TimeoutExpired:
                triton.kill()
        code = daemon.stop()
        if code != 0:
            log(f"  daemon exited with {code}; see {daemon.log_path}")
    return _report(rows, [s.name for s in servers], rss_mb, log)


def _rss_bytes(pids: list[int]) -> int:
    """Resident memory of ``pids`` together (Triton's python stubs included)."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def _report(rows: list[Row], names: list[str], rss_mb: dict[str, float], log) -> tuple[dict, list]:
    figures: dict = {"rss_mb_after_the_rows": {n: round(v, 1) for n, v in rss_mb.items()}}
    targets = []
    log("\nRSS after the rows: " + ", ".join(f"{n} {v:.0f} MB" for n, v in rss_mb.items()))
    if "triton" in rss_mb:
        below = rss_mb["edgebox"] < rss_mb["triton"]
        targets.append(
            (
                "edgebox RSS below Triton's after the rows",
                below,
                f"{rss_mb['edgebox']:.0f} vs {rss_mb['triton']:.0f} MB",
                round(rss_mb["edgebox"] / rss_mb["triton"], 3),
            )
        )
    log(f"\n{'row':<26}{'server':<9}{'req/s':>8}{'p50 us':>9}{'p99 us':>9}{'CPU us/req':>12}")
    for row in rows:
        entry = {}
        for name in names:
            mine = row.rounds[name]
            entry[name] = {
                "per_s": round(statistics.median(r.rate_per_s for r in mine), 1),
                "p50_us": round(statistics.median(r.p50_us for r in mine), 1),
                "p99_us": round(statistics.median(r.p99_us for r in mine), 1),
                "server_cpu_us": round(statistics.median(row.cpu_us[name]), 1),
            }
            log(
                f"{row.label:<26}{name:<9}{entry[name]['per_s']:>8.0f}"
                f"{entry[name]['p50_us']:>9.0f}{entry[name]['p99_us']:>9.0f}"
                f"{entry[name]['server_cpu_us']:>12.0f}"
            )
        if "triton" in names:
            ratio = _ratio_to_triton(row, "edgebox")
            entry["edgebox_over_triton"] = round(ratio, 3)
            log(f"{'':<26}{'ratio':<9}{ratio:>8.2f}")
            if "floor" in names:
                ceiling = _ratio_to_triton(row, "floor")
                entry["floor_over_triton"] = round(ceiling, 3)
                log(f"{'':<26}{'floor':<9}{ceiling:>8.2f}")
            targets.append(
                (
                    f"{row.label} req/s >= {RATE_TARGET}x Triton",
                    ratio >= RATE_TARGET,
                    f"{entry['edgebox']['per_s']:.0f} vs {entry['triton']['per_s']:.0f} req/s "
                    f"(median per-round ratio {ratio:.2f})",
                    round(ratio, 3),
                )
            )
        figures[row.label] = entry
    return figures, targets


def _ratio_to_triton(row: Row, name: str) -> float:
    """The median over rounds of ``name``'s requests/s over Triton's in the same round."""
    return statistics.median(
        a.rate_per_s / b.rate_per_s
        for a, b in zip(row.rounds[name], row.rounds["triton"], strict=True)
    )
