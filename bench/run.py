"""``make bench``: the daemon against its floors, as ratios, in one run.

Writes a model repository under ``bench/out/``, starts the real daemon on it
(port 0), then measures in interleaved rounds, each round taking every
measurement once in a rotating order: ONNX Runtime called directly, a bare
loopback socket round trip of the same byte counts, and the daemon through
``tritonclient.http`` at concurrency 1 and 8 (plus, as a diagnostic, through a
minimal client that sends the same bytes). Figures are medians of the
per-round values; each target is judged on the median of its per-round ratio,
so a noisy spell hits the daemon and its floors alike. Then the server-choice
comparison (``bench/server_choice.py``). Then issue 3's two measurements:
dynamic batching against none at concurrency 8 (``bench/batching.py``, on the
same daemon and repository) and the time from ``edgebox publish`` to the first
answer by the new version (``bench/drops.py``, on a poll-mode daemon of its own).
Then issue 4's stream throughput against the detector alone
(``bench/stream_fps.py``, in this process, on the demo's ``lane_pipeline``).
Then issue 9's cost of running python models in a process of their own
(``bench/isolation.py``, on a daemon of its own).
Then issue 9's connection exhaustion: new clients served while 128 slow
sockets are held (``bench/slowloris.py``, on the same daemon).
Then issue 10's transports: HTTP binary and gRPC against the direct call
(``bench/transports.py``, on the same daemon, which serves both).
Then issue 13's sequence batcher against the same models without it
(``bench/sequence.py``, on a daemon of its own).
Then issue 21's shadow rollout: the demo's ``lane_pipeline`` at a stream's
pace with a shadow rollout of its detector running and without
(``bench/shadow.py``, on two daemons of their own).
Then issue 22's perf_analyzer: the same perf_analyzer command against edgebox
and against a real Triton 2.51 where ``.parity/`` holds one
(``bench/perf_analyzer.py``, on a daemon of its own).

    python bench/run.py                       # full run, about 5 minutes
    python bench/run.py --quick               # smoke run, under a minute
    python bench/run.py --no-fail             # exit 0 even if a target fails
    python bench/run.py --skip-server-choice
    python bench/run.py --server-choice-only
    python bench/run.py --issue3              # only batching and drops, under 2 minutes
    python bench/run.py --only batching,drops # any of: issue2, server-choice, batching, drops,
                                              # stream, slowloris, isolation, transports
    python bench/run.py --only stream         # only the stream throughput, about 2 minutes
    python bench/run.py --only isolation      # only python model isolation, about 1.5 minutes
    python bench/run.py --only slowloris      # only the slow-sockets case, under a minute
    python bench/run.py --only transports     # only HTTP vs gRPC, about 2 minutes
    python bench/run.py --only mqtt           # only MQTT publish cost, spool drain and writes
    python bench/run.py --only observers      # only lane c=8 with dashboard and metrics watching
    python bench/run.py --only sequence       # only sequence batching vs the same model without
    python bench/run.py --only shadow         # only lane_pipeline with a shadow rollout vs none
    python bench/run.py --only perf-analyzer  # only perf_analyzer against edgebox and Triton 2.51
    python bench/run.py --only vs-triton      # only edgebox vs Triton 2.51 (python models)

Exits 1 when a target fails (unless ``--no-fail``). Results also go to
``bench/out/results.json``; the daemon's log to ``bench/out/daemon.log``, the
poll-mode daemon's (version drops) to ``bench/out/drops/daemon.log``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for _path in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import tritonclient.http as httpclient  # noqa: E402

from bench import (  # noqa: E402
    batching,
    drops,
    isolation,
    mqtt_wear,
    observers,
    sequence,
    server_choice,
    shadow,
    slowloris,
    stream_fps,
    transports,
    vs_triton,
)
from bench import mqtt as mqtt_bench  # noqa: E402
from bench import perf_analyzer as perf_analyzer_bench  # noqa: E402
from bench.cpu_time import process_cpu_s  # noqa: E402
from bench.floors import DirectSession, SocketFloor  # noqa: E402
from bench.latency import Round, Summary  # noqa: E402
from bench.load import MinimalHttpLoad, TritonLoad  # noqa: E402
from bench.workload import Workload, write_repository  # noqa: E402
from daemon_process import DaemonProcess  # noqa: E402
from scripts.perf_analyzer import PerfAnalyzer  # noqa: E402
from scripts.triton_reference import Reference  # noqa: E402

OUT = REPO_ROOT / "bench" / "out"
MAX_CALLS = 200_000


@dataclass(frozen=True)
class Plan:
    """Rounds, and seconds per measurement per round."""

    rounds: int
    add_sub_s: float
    lane_s: float
    lane_c8_s: float
    choice_rounds: int
    choice_s: float
    batch_rounds: int
    """Issue 3: rounds of the batching comparison, and seconds per model per
    round through tritonclient and through the bare-socket clients."""
    batch_triton_s: float
    batch_bare_s: float
    floor_rounds: int
    """Rounds of ONNX Runtime batch 8 against 8 x batch 1, in-process."""
    drops: int
    """Versions published, one after another, to the poll-mode daemon."""
    stream_rounds: int
    """Issue 4: rounds of the stream comparison, and seconds per measurement."""
    stream_s: float
    isolation_rounds: int
    """Issue 9: rounds of the isolation comparison, and the scale of each
    cell's seconds (``bench/isolation.py`` ``SECONDS``)."""
    isolation_scale: float
    slowloris_s: float
    """Issue 9: seconds of new clients per slow-sockets case."""
    transport_rounds: int
    """Issue 10: rounds of the transport comparison, and seconds per add_sub
    cell per round (lane cells twice that, concurrency 8 cells 1.5 times)."""
    transport_s: float
    shadow_rounds: int
    """Issue 21: rounds of the shadow rollout comparison, and seconds of
    frames per daemon per round."""
    shadow_s: float
    perf_analyzer_rounds: int
    """Issue 22: rounds of perf_analyzer runs, and its measurement window."""
    perf_analyzer_window_ms: int
    vs_triton_rounds: int
    """Issue 25: rounds of edgebox against Triton 2.51, and seconds per add_sub
    row per server per round (lane rows twice that)."""
    vs_triton_s: float


FULL = Plan(
    rounds=9,
    add_sub_s=1.0,
    lane_s=1.5,
    lane_c8_s=3.0,
    choice_rounds=15,
    choice_s=0.5,
    batch_rounds=10,
    batch_triton_s=1.0,
    batch_bare_s=0.75,
    floor_rounds=15,
    drops=6,
    stream_rounds=5,
    stream_s=4.0,
    isolation_rounds=5,
    isolation_scale=1.0,
    slowloris_s=10.0,
    transport_rounds=7,
    transport_s=0.5,
    shadow_rounds=5,
    shadow_s=10.0,
    perf_analyzer_rounds=3,
    perf_analyzer_window_ms=1000,
    vs_triton_rounds=5,
    vs_triton_s=2.0,
)
QUICK = Plan(
    rounds=3,
    add_sub_s=0.3,
    lane_s=0.5,
    lane_c8_s=1.0,
    choice_rounds=3,
    choice_s=0.3,
    batch_rounds=2,
    batch_triton_s=0.5,
    batch_bare_s=0.4,
    floor_rounds=5,
    drops=3,
    stream_rounds=2,
    stream_s=1.5,
    isolation_rounds=2,
    isolation_scale=0.4,
    slowloris_s=3.0,
    transport_rounds=2,
    transport_s=0.2,
    shadow_rounds=2,
    shadow_s=2.5,
    perf_analyzer_rounds=1,
    perf_analyzer_window_ms=300,
    vs_triton_rounds=1,
    vs_triton_s=0.5,
)
PARTS = (
    "issue2",
    "server-choice",
    "batching",
    "drops",
    "stream",
    "slowloris",
    "isolation",
    "transports",
    "mqtt",
    "observers",
    "sequence",
    "shadow",
    "perf-analyzer",
    "vs-triton",
)


@dataclass
class Step:
    """One measurement, taken once per round."""

    model: str
    what: str
    seconds: float
    measure: Callable[[float], Round]
    on_daemon: bool = False
    """Also collect the daemon's statistics for the requests of each round."""
    rounds: list[Round] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    """Per round, CPU time of this process (clients, or ONNX Runtime for
    ``direct``, or the client half of ``socket``) per call."""
    daemon_cpu_us: list[float] = field(default_factory=list)
    """Per round, the daemon's CPU time per call (idle but for spinning
    threads during the floors)."""
    inside: dict[str, list[int]] = field(default_factory=dict)
    """Daemon statistics summed over rounds: part -> [count, ns]."""

    @property
    def label(self) -> str:
        return f"{self.model} {self.what}"


@dataclass(frozen=True)
class Target:
    name: str
    passed: bool
    text: str
    ratio: float
    """Median per-round ratio of measured to allowed: latency passes at <= 1,
    throughput at >= 1."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="edgebox ratio benchmark")
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even if a target fails")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--skip-server-choice", action="store_true", help="no uvicorn comparison")
    which.add_argument("--server-choice-only", action="store_true", help="only that comparison")
    which.add_argument(
        "--issue3", action="store_true", help="only dynamic batching and version drops"
    )
    which.add_argument(
        "--only", metavar="PARTS", help=f"comma-separated, any of: {', '.join(PARTS)}"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    parts = _parts(parser, args)

    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": machine(), "plan": dataclasses.asdict(plan)}
    print(machine_line(results["machine"]), flush=True)
    workloads = write_repository(OUT / "repository")
    batch_workloads = (
        batching.write_models(OUT / "repository", workloads["lane"]) if "batching" in parts else {}
    )
    daemon = DaemonProcess(OUT / "repository", OUT / "daemon.log", [])
    targets: list[Target] = []
    try:
        if parts & {"issue2", "server-choice", "batching", "slowloris", "transports"}:
            daemon.start()
        if parts & {"issue2", "server-choice"}:
            for workload in workloads.values():
                workload.measure_body_sizes(daemon.url)
                print(
                    f"{workload.name}: request body {workload.request_bytes} B, "
                    f"response body {workload.response_bytes} B",
                    flush=True,
                )
            results["bodies"] = {
                w.name: {"request_bytes": w.request_bytes, "response_bytes": w.response_bytes}
                for w in workloads.values()
            }
            directs = {name: DirectSession(w.model_path, w.feeds) for name, w in workloads.items()}
            expected = {name: direct.run() for name, direct in directs.items()}
        if "issue2" in parts:
            steps = measure_daemon(daemon, workloads, directs, expected, plan)
            print_table(steps)
            targets = check_targets({(s.model, s.what): s for s in steps})
            results["measurements"] = {s.label: step_dict(s) for s in steps}
        if "server-choice" in parts:
            print("\nserver choice: add_sub, concurrency 1", flush=True)
            choice = server_choice.compare(
                workloads["add_sub"], daemon.url, plan.choice_rounds, plan.choice_s, expected
            )
            results["server_choice"] = print_choice(choice)
        if "transports" in parts:
            print("\nissue 10: HTTP binary and gRPC against the direct call", flush=True)
            figures, found = transports.measure(
                daemon.url,
                daemon.grpc_url,
                daemon.process.pid,
                workloads,
                plan.transport_rounds,
                plan.transport_s,
                log=_progress,
            )
            results["transports"] = figures
            targets += [Target(*t) for t in found]
        if "batching" in parts:
            print("\nissue 3: dynamic batching, lane, concurrency 8", flush=True)
            figures, found = batching.measure(
                daemon.url,
                daemon.process.pid,
                batch_workloads,
                plan.batch_rounds,
                plan.batch_triton_s,
                plan.batch_bare_s,
                plan.floor_rounds,
                log=_progress,
            )
            results["batching"] = figures
            targets += [Target(*t) for t in found]
        if "slowloris" in parts:
            print(
                f"\nissue 9: new clients while {slowloris.SLOW_SOCKETS} slow sockets are held",
                flush=True,
            )
            figures, found = slowloris.measure(
                daemon.url, workloads["add_sub"], plan.slowloris_s, log=_progress
            )
            results["slowloris"] = figures
            targets += [Target(*t) for t in found]
    finally:
        code = daemon.stop()
        if code != 0:
            print(f"daemon exited with {code}; see {daemon.log_path}", file=sys.stderr)
    if "mqtt" in parts:
        print("\nissue 11: MQTT publish cost and spool drain (local mosquitto)", flush=True)
        figures, found = mqtt_bench.measure(OUT / "mqtt", log=_progress)
        beside, found_beside = mqtt_bench.measure_http_beside(
            OUT / "mqtt", OUT / "repository", workloads["add_sub"], 5, 3.0, log=_progress
        )
        print("\nissue 19: MQTT spool writes per hour and the kill -9 window", flush=True)
        wear, found_wear = mqtt_wear.measure_writes(OUT / "mqtt", log=_progress)
        kill_window = mqtt_wear.measure_kill_window(OUT / "mqtt", log=_progress)
        results["mqtt"] = {
            **figures,
            "http_beside_mqtt": beside,
            "writes_per_hour": wear,
            "kill_9_window": kill_window,
        }
        targets += [Target(*t) for t in found + found_beside + found_wear]
    if "observers" in parts:
        print("\nissue 12: lane c=8 with the dashboard and Prometheus watching", flush=True)
        figures, found = observers.measure(
            OUT / "observers", OUT / "repository", workloads["lane"], 6, 4.0, log=_progress
        )
        results["observers"] = figures
        targets += [Target(*t) for t in found]
    if "drops" in parts:
        figures, found = measure_drops(plan)
        results["drops"] = figures
        targets += [Target(*t) for t in found]
    if "stream" in parts:
        figures, found = measure_stream(plan)
        results["stream"] = figures
        targets += [Target(*t) for t in found]
    if "isolation" in parts:
        figures, found = measure_isolation(plan)
        results["isolation"] = figures
        targets += [Target(*t) for t in found]
    if "sequence" in parts:
        print("\nissue 13: sequence batching against the same models without it", flush=True)
        rounds, c1_s, c8_s = (2, 0.5, 0.8) if args.quick else (7, 1.2, 2.5)
        figures, found = sequence.measure(OUT / "sequence", rounds, c1_s, c8_s, log=_progress)
        results["sequence"] = figures
        targets += [Target(*t) for t in found]
    if "shadow" in parts:
        print(
            f"\nissue 21: {shadow.PIPELINE} at a stream's pace with a shadow rollout "
            f"of {shadow.DETECTOR} and without, {plan.shadow_rounds} rounds",
            flush=True,
        )
        figures, found = shadow.measure(
            OUT / "shadow", plan.shadow_rounds, plan.shadow_s, log=_progress
        )
        results["shadow"] = figures
        targets += [Target(*t) for t in found]
    if "perf-analyzer" in parts:
        print(
            f"\nissue 22: perf_analyzer against edgebox and Triton 2.51, "
            f"{plan.perf_analyzer_rounds} rounds",
            flush=True,
        )
        figures, found = perf_analyzer_bench.measure(
            OUT / "perf_analyzer",
            PerfAnalyzer(),
            Reference(Path(os.environ.get("EDGEBOX_TRITON_HOME", REPO_ROOT / ".parity"))),
            plan.perf_analyzer_rounds,
            plan.perf_analyzer_window_ms,
            log=_progress,
        )
        results["perf_analyzer"] = figures
        targets += [Target(*t) for t in found]
    if "vs-triton" in parts:
        print(
            f"\nissue 25: edgebox against Triton 2.51 on the same python models, "
            f"{plan.vs_triton_rounds} rounds",
            flush=True,
        )
        figures, found = vs_triton.measure(
            OUT / "vs_triton",
            Reference(Path(os.environ.get("EDGEBOX_TRITON_HOME", REPO_ROOT / ".parity"))),
            plan.vs_triton_rounds,
            plan.vs_triton_s,
            log=_progress,
        )
        results["vs_triton"] = figures
        targets += [Target(*t) for t in found]
    for target in targets:
        print(f"{'PASS' if target.passed else 'FAIL'} {target.name}: {target.text}")
    results["targets"] = [target.__dict__ for target in targets]
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    failed = [t for t in targets if not t.passed]
    if failed and not args.no_fail:
        print(f"{len(failed)} of {len(targets)} targets failed", file=sys.stderr)
        return 1
    return 0


def _parts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> set[str]:
    if args.issue3:
        return {"batching", "drops"}
    if args.server_choice_only:
        return {"server-choice"}
    if args.only:
        parts = {p.strip() for p in args.only.split(",") if p.strip()}
        unknown = parts - set(PARTS)
        if unknown or not parts:
            parser.error(f"--only: unknown part(s) {sorted(unknown)}; choose from {PARTS}")
        return parts
    return set(PARTS) - ({"server-choice"} if args.skip_server_choice else set())


def _progress(line: str) -> None:
    print(line, flush=True)


def measure_drops(plan: Plan) -> tuple[dict, list]:
    """Issue 3's version drops, on a poll-mode daemon of its own
    (``bench/out/drops/``; its log is ``bench/out/drops/daemon.log``)."""
    print(
        f"\nissue 3: version drops, poll mode every {drops.POLL_SECS:g} s, {plan.drops} versions",
        flush=True,
    )
    folder = OUT / "drops"
    repository, files, staged = drops.prepare(folder, plan.drops)
    daemon = DaemonProcess(repository, folder / "daemon.log", drops.daemon_args())
    try:
        daemon.start()
        return drops.measure(daemon.url, repository, files, staged, daemon.log_path, log=_progress)
    finally:
        code = daemon.stop()
        if code != 0:
            print(f"drops daemon exited with {code}; see {daemon.log_path}", file=sys.stderr)


def measure_stream(plan: Plan) -> tuple[dict, list]:
    """Issue 4's stream throughput, in this process (``bench/out/stream/``)."""
    print(
        f"\nissue 4: stream fps against {stream_fps.DETECTOR} alone, {plan.stream_rounds} rounds",
        flush=True,
    )
    repository, video = stream_fps.prepare(OUT / "stream")
    return stream_fps.measure(repository, video, plan.stream_rounds, plan.stream_s, log=_progress)


def measure_isolation(plan: Plan) -> tuple[dict, list]:
    """Issue 9's python model isolation, on a daemon of its own
    (``bench/out/isolation/``; its log is ``bench/out/isolation/daemon.log``)."""
    print(
        f"\nissue 9: python models in-process vs in a process of their own, "
        f"{plan.isolation_rounds} rounds",
        flush=True,
    )
    folder = OUT / "isolation"
    repository = isolation.prepare(folder)
    daemon = DaemonProcess(repository, folder / "daemon.log", [])
    try:
        daemon.start()
        return isolation.measure(
            daemon.url, daemon.process.pid, plan.isolation_rounds, plan.isolation_scale, _progress
        )
    finally:
        code = daemon.stop()
        if code != 0:
            print(f"isolation daemon exited with {code}; see {daemon.log_path}", file=sys.stderr)


def measure_daemon(
    daemon: DaemonProcess,
    workloads: dict[str, Workload],
    directs: dict[str, DirectSession],
    expected: dict,
    plan: Plan,
) -> list[Step]:
    """Every step once per round, the order rotated by one each round; a short
    untimed pass of every step first."""
    floor = SocketFloor()
    sockets = {
        name: floor.connect(w.request_bytes, w.response_bytes) for name, w in workloads.items()
    }
    stats_client = httpclient.InferenceServerClient(daemon.url)
    try:
        steps: list[Step] = []
        for name, seconds in (("add_sub", plan.add_sub_s), ("lane", plan.lane_s)):
            triton = TritonLoad(daemon.url, workloads[name])
            triton.check(expected[name])
            minimal = MinimalHttpLoad(daemon.url, workloads[name])
            steps += [
                Step(name, "direct", seconds, _bounded(directs[name].measure)),
                Step(name, "socket", seconds, _bounded(sockets[name].measure)),
                Step(name, "edgebox c=1", seconds, _bounded(triton.measure, 1), True),
                Step(name, "minimal c=1", seconds, _bounded(minimal.measure), True),
                Step(
                    name,
                    "edgebox c=8",
                    plan.lane_c8_s if name == "lane" else seconds,
                    _bounded(triton.measure, 8),
                    True,
                ),
            ]
        for step in steps:
            step.measure(min(step.seconds, 0.3))
        for index in range(plan.rounds):
            shift = index % len(steps)
            for step in steps[shift:] + steps[:shift]:
                _take(step, daemon, stats_client)
            print(
                f"  round {index + 1}/{plan.rounds} p50 us: "
                + ", ".join(f"{s.label} {s.rounds[-1].p50_us:.0f}" for s in steps),
                flush=True,
            )
        return steps
    finally:
        stats_client.close()
        for connection in sockets.values():
            connection.close()
        floor.close()


def _bounded(measure, *args) -> Callable[[float], Round]:
    return lambda seconds: measure(*args, seconds, MAX_CALLS)


_PARTS = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def _take(step: Step, daemon: DaemonProcess, stats_client) -> None:
    before = _inference_stats(stats_client, step.model) if step.on_daemon else None
    client_before = process_cpu_s(os.getpid())
    daemon_before = process_cpu_s(daemon.process.pid)
    result = step.measure(step.seconds)
    client_after = process_cpu_s(os.getpid())
    daemon_after = process_cpu_s(daemon.process.pid)
    step.rounds.append(result)
    if None not in (client_before, client_after, daemon_before, daemon_after):
        step.client_cpu_us.append((client_after - client_before) / result.calls * 1e6)
        step.daemon_cpu_us.append((daemon_after - daemon_before) / result.calls * 1e6)
    if before is not None:
        after = _inference_stats(stats_client, step.model)
        for part in _PARTS:
            total = step.inside.setdefault(part, [0, 0])
            total[0] += after[part][0] - before[part][0]
            total[1] += after[part][1] - before[part][1]


def _inference_stats(client, model: str) -> dict[str, tuple[int, int]]:
    stats = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    return {part: (stats[part]["count"], stats[part]["ns"]) for part in _PARTS}


def _inside_mean_us(step: Step, part: str) -> float | None:
    count, ns = step.inside.get(part, (0, 0))
    return ns / count / 1e3 if count else None


def step_dict(step: Step) -> dict:
    document = Summary.of(step.rounds).as_dict()
    if step.client_cpu_us:
        document["this_process_cpu_us_per_call"] = round(statistics.median(step.client_cpu_us), 1)
        document["daemon_cpu_us_per_call"] = round(statistics.median(step.daemon_cpu_us), 1)
    if step.inside:
        document["daemon_statistics_mean_us"] = {
            part: round(mean, 1)
            for part in _PARTS
            if (mean := _inside_mean_us(step, part)) is not None
        }
    return document


def check_targets(steps: dict[tuple[str, str], Step]) -> list[Target]:
    """The issue's three targets, each on the median over rounds of
    measured/allowed, where a round's allowance comes from that round's floors."""

    def latency(model: str, factor: int, floor_name: str) -> Target:
        direct, sock = steps[(model, "direct")], steps[(model, "socket")]

        def ratio_of(server: Step) -> float:
            return statistics.median(
                s.p50_us / (d.p50_us + factor * k.p50_us)
                for s, d, k in zip(server.rounds, direct.rounds, sock.rounds, strict=True)
            )

        server = steps[(model, "edgebox c=1")]
        ratio = ratio_of(server)
        alone = ratio_of(steps[(model, "minimal c=1")])
        server_us, direct_us, sock_us = (
            Summary.of(x.rounds).p50_us for x in (server, direct, sock)
        )
        return Target(
            f"{model} c=1 p50 <= direct p50 + {factor} x {floor_name} p50",
            ratio <= 1.0,
            f"{server_us:.0f} us vs {direct_us:.0f} + {factor} x {sock_us:.0f} = "
            f"{direct_us + factor * sock_us:.0f} us "
            f"(median per-round ratio {ratio:.2f}, needs <= 1; "
            f"the same ratio through the minimal client: {alone:.2f})",
            round(ratio, 3),
        )

    server, direct = steps[("lane", "edgebox c=8")], steps[("lane", "direct")]
    ratio = statistics.median(
        s.rate_per_s / (0.5 * d.rate_per_s)
        for s, d in zip(server.rounds, direct.rounds, strict=True)
    )
    server_rate, direct_rate = (Summary.of(x.rounds).rate_per_s for x in (server, direct))
    ceiling = ""
    if server.client_cpu_us:
        cpu_us = statistics.median(server.client_cpu_us) + statistics.median(server.daemon_cpu_us)
        cores = len(os.sched_getaffinity(0))
        ceiling = (
            f"; clients and daemon used {cpu_us / 1e3:.1f} ms CPU per request, "
            f"which {cores} cores cap at {cores / cpu_us * 1e6:.0f}/s"
        )
    return [
        latency("add_sub", 5, "socket round trip"),
        latency("lane", 2, "socket transfer"),
        Target(
            "lane c=8 requests/s >= 0.5 x direct single-thread calls/s",
            ratio >= 1.0,
            f"{server_rate:.0f}/s vs 0.5 x {direct_rate:.0f}/s = {0.5 * direct_rate:.0f}/s "
            f"(median per-round ratio {ratio:.2f}, needs >= 1{ceiling})",
            round(ratio, 3),
        ),
    ]


def print_table(steps: list[Step]) -> None:
    print(
        f"\n{'model':<8}{'measurement':<13}{'p50 us':>9}{'p99 us':>10}{'per s':>8}"
        f"{'p50 range':>14}{'CPU us/req':>17}   daemon statistics, mean us"
    )
    print(f"{'':<62}{'client':>8}{'daemon':>8}")
    for step in steps:
        s = Summary.of(step.rounds)
        cpu = (
            f"{statistics.median(step.client_cpu_us):>8.0f}"
            f"{statistics.median(step.daemon_cpu_us):>8.0f}"
            if step.client_cpu_us
            else f"{'':>16}"
        )
        inside = ""
        if step.inside.get("success", [0])[0]:
            inside = (
                f"   request {_inside_mean_us(step, 'success'):.0f}, "
                f"queue {_inside_mean_us(step, 'queue'):.0f}, "
                f"infer {_inside_mean_us(step, 'compute_infer'):.0f}"
            )
        print(
            f"{step.model:<8}{step.what:<13}{s.p50_us:>9.1f}{s.p99_us:>10.1f}{s.rate_per_s:>8.0f}"
            f"{f'{s.p50_low_us:.0f}-{s.p50_high_us:.0f}':>14} {cpu}{inside}"
        )
    print(
        "minimal c=1: the same request bytes from a bare-socket client, separating the\n"
        "server's cost from tritonclient's. CPU us/req: 'client' is this process (the clients;\n"
        "ONNX Runtime for direct; one end for socket), 'daemon' the daemon process.\n"
    )


def print_choice(choice: dict[tuple[str, str], list[Round]]) -> dict:
    """The comparison table; the last column pairs each round with edgebox's
    round through the same client. Returns the figures for results.json."""
    print(
        f"{'server':<16}{'client':<14}{'p50 us':>9}{'p99 us':>10}{'per s':>8}{'p50 range':>14}"
        "   p50 / edgebox p50 (median per round)"
    )
    figures = {}
    for (name, client), rounds in choice.items():
        s = Summary.of(rounds)
        ratio = server_choice.paired_ratio(rounds, choice[("edgebox", client)])
        print(
            f"{name:<16}{client:<14}{s.p50_us:>9.1f}{s.p99_us:>10.1f}{s.rate_per_s:>8.0f}"
            f"{f'{s.p50_low_us:.0f}-{s.p50_high_us:.0f}':>14}   {ratio:.2f}"
        )
        figures[f"{name} via {client}"] = {**s.as_dict(), "p50_over_edgebox": round(ratio, 3)}
    print()
    return figures


def machine() -> dict:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }


def machine_line(m: dict) -> str:
    return f"edgebox bench: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, {m['date']}"


if __name__ == "__main__":
    sys.exit(main())
