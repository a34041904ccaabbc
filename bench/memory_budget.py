"""Issue 25: where the daemon's memory goes, by component, at start and after
minutes of the demo under load.

The daemon runs the demo as ``make run`` does (``etc/demo.yaml``: the
synthetic road stream through ``lane_pipeline`` at 15 fps, MQTT to a local
mosquitto, the dashboard) with ``bench/memory_probe`` on its ``PYTHONPATH``,
which traces its allocations. Beside the stream, clients call ``add_sub``
over HTTP and gRPC and ``lane_pipeline`` over HTTP at a steady rate, and a
dashboard reader fetches what the overview page fetches every second. At
each checkpoint the probe reports the traced bytes by component; what RSS
holds beyond them and the tracer's own bookkeeping is native memory (ONNX
Runtime's arenas, grpc core, the interpreter's own) and the allocator's slack.

    .venv/bin/python -m bench.memory_budget --minutes 10

Tracing slows the daemon several times over, so these are sizes, never
speeds; the loads are paced, so the work done is the same with or without it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "bench" / "out" / "memory"

IMPORTING = "<frozen importlib._bootstrap"
CODE = "code (modules imported)"
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gRPC", ("/edgebox/protocol/grpc/", "/site-packages/grpc/", "/tritonclient/grpc/")),
    ("HTTP", ("/edgebox/protocol/http/",)),
    ("dashboard", ("/edgebox/dashboard/", "/site-packages/flask/", "/site-packages/werkzeug/")),
    ("telemetry ring", ("/edgebox/telemetry/",)),
    ("history and alerts", ("/edgebox/history/", "/edgebox/alerts/")),
    ("MQTT", ("/edgebox/mqtt/", "/site-packages/paho/")),
    ("event bus", ("/edgebox/events/",)),
    ("metrics", ("/edgebox/metrics/", "/site-packages/prometheus_client/")),
    ("streams", ("/edgebox/streams/",)),
    ("python models", ("/edgebox/backends/python/", "/model.py")),
    ("ONNX Runtime models", ("/edgebox/backends/onnxruntime/", "/site-packages/onnxruntime/")),
    ("scheduling and dataplane", ("/edgebox/scheduling/", "/edgebox/dataplane")),
    ("logging", ("/edgebox/log_ring", "/logging/")),
    ("edgebox, other", ("/edgebox/",)),
)
"""First match wins, each rule tried against the whole traceback from the
allocating frame outwards: an allocation belongs to the innermost edgebox
part (or library) that asked for it. Anything allocated while importing
counts as code (``CODE``)."""

OTHER = "interpreter and libraries, other"


def component_of(filenames: Sequence[str]) -> str:
    """``filenames``: an allocation's traceback, oldest frame first (as
    ``tracemalloc`` orders it)."""
    if any(IMPORTING in filename for filename in filenames):
        return CODE
    for name, patterns in COMPONENTS:
        for filename in reversed(filenames):
            if any(p in filename for p in patterns):
                return name
    return OTHER


def _paced(every_s: float, stop: threading.Event, work: Callable[[], object]) -> None:
    """``work`` every ``every_s`` until ``stop``; a failure is counted, not fatal."""
    next_at = time.monotonic()
    while not stop.is_set():
        try:
            work()
        except Exception as error:  # a load that fails must not end the measurement
            print(f"  load: {error!r}", file=sys.stderr)
        next_at += every_s
        stop.wait(max(0.0, next_at - time.monotonic()))


def _loads(daemon, stop: threading.Event) -> list[threading.Thread]:
    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a = np.arange(16, dtype=np.float32).reshape(1, 16)

    def add_sub_inputs(module):
        inputs = [module.InferInput(n, [1, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        return inputs

    http = httpclient.InferenceServerClient(daemon.url, network_timeout=60)
    grpc = grpcclient.InferenceServerClient(daemon.grpc_url)
    frame = np.random.default_rng(3).integers(0, 255, (360, 640, 3), dtype=np.uint8)
    image = httpclient.InferInput("image", list(frame.shape), "UINT8")
    image.set_data_from_numpy(frame)
    lane_http = httpclient.InferenceServerClient(daemon.url, network_timeout=60)
    http_inputs, grpc_inputs = add_sub_inputs(httpclient), add_sub_inputs(grpcclient)
    board = [
        "/api/v1/overview",
        "/api/v1/telemetry?seconds=60",
        "/api/v1/models",
        "/api/v1/streams",
        "/api/v1/streams/demo-road/frame.jpg",
        "/api/v1/events",
        "/api/v1/alerts",
    ]

    def read_board() -> None:
        for path in board:
            with urllib.request.urlopen(daemon.dashboard_url + path, timeout=30) as answer:
                answer.read()

    work = [
        (0.02, lambda: http.infer("add_sub", http_inputs)),
        (0.02, lambda: grpc.infer("add_sub", grpc_inputs, client_timeout=60)),
        (0.5, lambda: lane_http.infer("lane_pipeline", [image])),
        (1.0, read_board),
    ]
    threads = [
        threading.Thread(target=_paced, args=(every, stop, call), daemon=True)
        for every, call in work
    ]
    for thread in threads:
        thread.start()
    return threads


def _snapshot(pid: int, folder: Path, number: int) -> dict:
    from daemon_process import wait_for

    os.kill(pid, signal.SIGUSR2)
    path = folder / f"snapshot-{number}.json"
    wait_for(path.exists, 300, 0.2, what=f"{path.name} from the daemon's memory probe")
    return json.loads(path.read_text())


def _rss_line(snapshot: dict) -> str:
    rss, tracer = snapshot["rss"] / 2**20, snapshot["tracer"] / 2**20
    return f"RSS {rss:.0f} MB, {rss - tracer:.0f} MB less the tracer's own"


def _table(checkpoints: list[tuple[float, dict]]) -> str:
    snapshots = [s for _, s in checkpoints]

    def row(label: str, value: Callable[[dict], int]) -> str:
        return f"| {label} | " + " | ".join(f"{value(s) / 2**20:.1f}" for s in snapshots) + " |"

    names = sorted(
        {n for s in snapshots for n in s["components"]},
        key=lambda n: -snapshots[-1]["components"].get(n, 0),
    )
    lines = [
        "| MB | " + " | ".join(f"{m:.1f} min" for m, _ in checkpoints) + " |",
        "|---" * (len(checkpoints) + 1) + "|",
    ]
    lines += [row(name, lambda s, n=name: s["components"].get(n, 0)) for name in names]
    lines.append(row("**traced, all**", lambda s: s["traced"]))
    lines.append(row("native and allocator slack", lambda s: s["rss"] - s["tracer"] - s["traced"]))
    lines.append(row("**RSS less the tracer's own**", lambda s: s["rss"] - s["tracer"]))
    lines.append(row("the tracer's own (tracemalloc)", lambda s: s["tracer"]))
    return "\n".join(lines)


def _rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _run(minutes: float, every: float, traced: bool) -> list[tuple[float, dict]]:
    """One daemon on the demo under the loads; a checkpoint at start and
    every ``every`` minutes: the probe's snapshot when ``traced``, else the
    RSS alone (the figure a device sees)."""
    from daemon_process import DaemonProcess
    from scripts.demo_broker import LocalMosquitto
    from scripts.run_demo import DEMO_CONFIG, mqtt_flags

    name = "traced" if traced else "untraced"
    folder = OUT / name
    probe = folder / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    for old in probe.glob("snapshot-*.json"):
        old.unlink()
    env = {}
    if traced:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT / "bench" / "memory_probe"), os.environ.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        env["EDGEBOX_MEMORY_PROBE"] = str(probe)
    broker = LocalMosquitto(folder / "mosquitto").start()
    daemon = DaemonProcess(
        REPO_ROOT / "model_repository",
        folder / "daemon.log",
        ["--config", str(REPO_ROOT / DEMO_CONFIG), *mqtt_flags(broker.url, folder / "run")],
        env=env,
        cwd=REPO_ROOT,
    )
    stop = threading.Event()
    checkpoints: list[tuple[float, dict]] = []

    def checkpoint(minute: float) -> None:
        pid = daemon.process.pid
        count = len(checkpoints) + 1
        snapshot = _snapshot(pid, probe, count) if traced else {"rss": _rss_of(pid)}
        checkpoints.append((minute, snapshot))
        line = _rss_line(snapshot) if traced else f"RSS {snapshot['rss'] / 2**20:.0f} MB"
        print(f"{name} {minute:.1f} min: {line}", flush=True)

    try:
        daemon.start(listen_timeout_s=300 if traced else 30)
        checkpoint(0.0)
        started = time.monotonic()
        threads = _loads(daemon, stop)
        while True:
            left = min(every, minutes - (time.monotonic() - started) / 60)
            if left <= 1e-6:
                break
            stop.wait(left * 60)
            checkpoint((time.monotonic() - started) / 60)
        stop.set()
        for thread in threads:
            thread.join(60)
    finally:
        stop.set()
        daemon.stop()
        broker.stop()
    return checkpoints


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=2.0, help="minutes between checkpoints")
    parser.add_argument(
        "--only", choices=("traced", "untraced"), help="one of the two runs (default: both)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    OUT.mkdir(parents=True, exist_ok=True)
    report = []
    if args.only != "traced":
        plain = _run(args.minutes, args.every, traced=False)
        (OUT / "untraced.json").write_text(json.dumps(plain, indent=1))
        report.append(
            "| RSS, untraced daemon (MB) | "
            + " | ".join(f"{s['rss'] / 2**20:.0f} at {m:.1f} min" for m, s in plain)
            + " |"
        )
    if args.only != "untraced":
        traced = _run(args.minutes, args.every, traced=True)
        (OUT / "traced.json").write_text(json.dumps(traced, indent=1))
        report.append(_table(traced))
    text = "\n\n".join(report)
    (OUT / "budget.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
