"""Issue 3, measurement 1: dynamic batching against none, LaneATT-shaped model,
8 concurrent clients.

The bench repository gets the same ONNX file (``build_lane_model``) under
several names that differ only in their config: ``lane_unbatched`` (no
``dynamic_batching``) and ``lane_batched_<delay>us``, one per
``max_queue_delay_microseconds`` in ``DELAYS_US``. All have
``max_batch_size: 8`` and one ``KIND_CPU`` instance, so the batcher's target
batch is 8 (a ``preferred_batch_size`` of 8 would change nothing; with 8
closed-loop clients no batch can be larger).

Each round drives every model once through ``tritonclient.http`` (8 threads,
one client each) and once through 8 bare-socket clients sending the same bytes,
in an order rotated each round. The target is judged on the median per-round
ratio of a batched model's requests/s to ``lane_unbatched``'s through
tritonclient, for the delay whose median is best (picked after the fact, which
favours the target). The daemon's ``batch_stats`` say which batch sizes
actually ran. Requests per CPU second of both processes are compared too: on a
shared machine, what other processes take moves requests/s but not that.

Two bounds explain the result: ONNX Runtime in this process (the daemon's
session options) timing one batch-8 run against eight batch-1 runs, which is
the most batching can save per request; and the CPU both processes spend per
request, which on a 2-core machine caps throughput whatever the server does.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tritonclient.http as httpclient

from bench.cpu_time import process_cpu_s
from bench.latency import Round, Summary, closed_loops
from bench.load import MinimalHttpLoad, TritonLoad
from bench.workload import Workload
from scripts.onnx_builders import LANE_ANCHORS, LANE_INPUT_SHAPE, LANE_VALUES, build_lane_model

UNBATCHED = "lane_unbatched"
DELAYS_US = (0, 2000, 5000)
MAX_BATCH = 8
CONCURRENCY = 8
TARGET_RATIO = 1.5
MAX_CALLS = 200_000
DRIVERS = ("tritonclient", "bare")


def batched_name(delay_us: int) -> str:
    return f"lane_batched_{delay_us}us"


def model_names() -> list[str]:
    return [UNBATCHED] + [batched_name(d) for d in DELAYS_US]


def lane_config(name: str, delay_us: int | None) -> str:
    """``delay_us`` None: no dynamic batching."""
    batching = (
        ""
        if delay_us is None
        else f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}\n"
    )
    dims = ", ".join(map(str, LANE_INPUT_SHAPE))
    return (
        f'name: "{name}"\n'
        'platform: "onnxruntime_onnx"\n'
        f"max_batch_size: {MAX_BATCH}\n"
        f'input [ {{ name: "input" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
        f'output [ {{ name: "predict_lanes" data_type: TYPE_FP32 '
        f"dims: [ {LANE_ANCHORS}, {LANE_VALUES} ] }} ]\n"
        "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
        f"{batching}"
    )


def write_models(root: Path, lane: Workload) -> dict[str, Workload]:
    """Adds the batching models to the bench repository at ``root``; one ONNX
    file, copied. Returns a workload per model (``lane``'s request)."""
    source = build_lane_model(root / UNBATCHED / "1" / "model.onnx")
    (root / UNBATCHED / "config.pbtxt").write_text(lane_config(UNBATCHED, None))
    workloads = {UNBATCHED: dataclasses.replace(lane, name=UNBATCHED, model_path=source)}
    for delay in DELAYS_US:
        name = batched_name(delay)
        target = root / name / "1" / "model.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        (root / name / "config.pbtxt").write_text(lane_config(name, delay))
        workloads[name] = dataclasses.replace(lane, name=name, model_path=target)
    return workloads


# -- the bare-socket driver at concurrency N ---------------------------------


class _BareClient(MinimalHttpLoad):
    """``MinimalHttpLoad`` with the connection opened and closed separately, so
    N of them can start their timed loops together."""

    def open(self) -> None:
        host, port = self.url.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=60)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._call()

    def call(self) -> None:
        self._call()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def bare_concurrent(url: str, workload: Workload, concurrency: int, duration_s: float) -> Round:
    """``concurrency`` bare-socket clients, each its own thread and connection,
    closed loop, started together after one untimed request each."""
    clients = [_BareClient(url, workload) for _ in range(concurrency)]

    def open_client(index: int):
        clients[index].open()
        return clients[index].call, clients[index].close

    return closed_loops(concurrency, duration_s, MAX_CALLS, open_client, "bare")


# -- ONNX Runtime's own batching gain -----------------------------------------


def ort_batch_floor(model_path: Path, image: np.ndarray, rounds: int) -> dict:
    """In this process, with the daemon's session options (one session, idle
    threads not spinning): per round, eight batch-1 runs and one batch-8 run
    (and the ``np.concatenate`` that builds its input), order alternating;
    wall time and this process's CPU time (all threads) of each. Their ratio
    bounds what batching can save inside ONNX Runtime."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = ort.InferenceSession(
        str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    singles = [image.copy() for _ in range(MAX_BATCH)]
    batch = np.concatenate(singles)

    def eight_single() -> None:
        for single in singles:
            session.run(None, {"input": single})

    def one_batch() -> None:
        session.run(None, {"input": batch})

    for _ in range(2):
        eight_single()
        one_batch()
    clock, cpu = time.perf_counter_ns, time.process_time_ns
    wall: dict[str, list[int]] = {"single": [], "batch": [], "concat": []}
    used: dict[str, list[int]] = {"single": [], "batch": [], "concat": []}

    def timed(what: str, run: Callable[[], object]) -> None:
        wall_before, cpu_before = clock(), cpu()
        run()
        wall[what].append(clock() - wall_before)
        used[what].append(cpu() - cpu_before)

    for index in range(rounds):
        if index % 2 == 0:
            timed("single", eight_single)
            timed("batch", one_batch)
        else:
            timed("batch", one_batch)
            timed("single", eight_single)
        timed("concat", lambda: np.concatenate(singles))
    single_ns, batch_ns = wall["single"], wall["batch"]

    def ms(values: list[int]) -> float:
        return round(statistics.median(values) / 1e6, 2)

    return {
        "rounds": rounds,
        "eight_batch1_ms": ms(single_ns),
        "one_batch8_ms": ms(batch_ns),
        "concatenate_8_inputs_ms": ms(wall["concat"]),
        "eight_batch1_cpu_ms": ms(used["single"]),
        "one_batch8_cpu_ms": ms(used["batch"]),
        "concatenate_8_inputs_cpu_ms": ms(used["concat"]),
        "gain": round(
            statistics.median(s / b for s, b in zip(single_ns, batch_ns, strict=True)), 3
        ),
    }


# -- the answers are each request's own -----------------------------------------


def check_rows(url: str, names: list[str], model_path: Path, repeats: int = 2) -> None:
    """Eight threads, each with its own image, call every model at once
    (``repeats`` times each); every answer must equal ONNX Runtime's output
    for that thread's image, so a batch hands each request its own rows."""
    rng = np.random.default_rng(11)
    images = [rng.random((1, *LANE_INPUT_SHAPE), dtype=np.float32) for _ in range(CONCURRENCY)]
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    expected = [session.run(None, {"input": image})[0] for image in images]
    failures: list[str] = []

    def worker(index: int) -> None:
        client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=60)
        try:
            tensor = httpclient.InferInput("input", list(images[index].shape), "FP32")
            tensor.set_data_from_numpy(images[index], binary_data=True)
            outputs = [httpclient.InferRequestedOutput("predict_lanes", binary_data=True)]
            for name in names:
                for _ in range(repeats):
                    got = client.infer(name, [tensor], outputs=outputs).as_numpy("predict_lanes")
                    if got is None or not np.allclose(got, expected[index], rtol=1e-4, atol=1e-5):
                        failures.append(f"{name}: client {index} got another image's output")
        except Exception as exc:
            failures.append(f"client {index}: {exc!r}")
        finally:
            client.close()

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"bench-check-{i}", daemon=True)
        for i in range(CONCURRENCY)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if any(thread.is_alive() for thread in threads):
        failures.append("a check thread did not finish within 120 s")
    if failures:
        raise AssertionError("batched answers are wrong: " + "; ".join(failures[:5]))


# -- the measurement ----------------------------------------------------------


@dataclass
class Cell:
    """One model through one driver, once per round."""

    model: str
    driver: str
    rounds: list[Round] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    daemon_cpu_us: list[float] = field(default_factory=list)
    batches: Counter = field(default_factory=Counter)
    """Executions by batch size, from the daemon's batch_stats."""
    batch_infer_ns: Counter = field(default_factory=Counter)
    """ONNX Runtime time by batch size, summed over those executions."""
    inside: dict[str, list[int]] = field(default_factory=dict)
    """Daemon inference_stats summed over rounds: part -> [count, ns]."""
    cores: list[tuple[float, float, float]] = field(default_factory=list)
    """Per round, cores in use: (this process and the daemon, every process
    on the machine, stolen by the hypervisor)."""

    def mean_us(self, part: str) -> float | None:
        count, ns = self.inside.get(part, (0, 0))
        return ns / count / 1e3 if count else None

    def as_dict(self) -> dict:
        document = Summary.of(self.rounds).as_dict()
        if self.client_cpu_us:
            document["client_cpu_us_per_request"] = round(statistics.median(self.client_cpu_us))
            document["daemon_cpu_us_per_request"] = round(statistics.median(self.daemon_cpu_us))
        document["executions_by_batch_size"] = {str(k): v for k, v in sorted(self.batches.items())}
        document["mean_batch"] = round(mean_batch(self.batches), 2)
        document["infer_ms_per_execution_by_batch_size"] = {
            str(k): round(self.batch_infer_ns[k] / v / 1e6, 2)
            for k, v in sorted(self.batches.items())
        }
        if self.cores:
            ours, busy, steal = (statistics.median(c[i] for c in self.cores) for i in range(3))
            document["cores_busy"] = {
                "bench_and_daemon": round(ours, 2),
                "whole_machine": round(busy, 2),
                "stolen": round(steal, 2),
            }
        document["daemon_statistics_mean_us"] = {
            part: round(mean, 1) for part in _PARTS if (mean := self.mean_us(part)) is not None
        }
        return document


_PARTS = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def mean_batch(batches: Counter) -> float:
    executions = sum(batches.values())
    return sum(size * count for size, count in batches.items()) / executions if executions else 0.0


def _stats(client, model: str) -> tuple[dict[str, tuple[int, int]], Counter, Counter]:
    stats = client.get_inference_statistics(model)["model_stats"][0]
    inference = stats["inference_stats"]
    parts = {p: (inference[p]["count"], inference[p]["ns"]) for p in _PARTS}
    batches = stats["batch_stats"]
    counts = Counter({int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in batches})
    infer_ns = Counter({int(b["batch_size"]): int(b["compute_infer"]["ns"]) for b in batches})
    return parts, counts, infer_ns


def measure(
    url: str,
    daemon_pid: int,
    workloads: dict[str, Workload],
    rounds: int,
    triton_s: float,
    bare_s: float,
    floor_rounds: int,
    log: Callable[[str], None] = print,
) -> tuple[dict, list]:
    """Returns (figures for results.json, [the target as (name, passed, text,
    ratio)]); see ``target``."""
    for workload in workloads.values():
        workload.measure_body_sizes(url)
    lane = workloads[UNBATCHED]
    check_rows(url, list(workloads), lane.model_path)
    log("  answers checked: 8 concurrent clients, each its own image, every model")
    floor = ort_batch_floor(lane.model_path, lane.feeds["input"], floor_rounds)
    log(
        f"  ONNX Runtime in-process: 8 x batch 1 {floor['eight_batch1_ms']:.2f} ms "
        f"(CPU {floor['eight_batch1_cpu_ms']:.2f}), 1 x batch 8 {floor['one_batch8_ms']:.2f} ms "
        f"(CPU {floor['one_batch8_cpu_ms']:.2f}), gain {floor['gain']:.2f}x; concatenating "
        f"8 inputs {floor['concatenate_8_inputs_ms']:.2f} ms"
    )
    drivers: dict[str, Callable[[Workload, float], Round]] = {
        "tritonclient": lambda w, s: TritonLoad(url, w).measure(CONCURRENCY, s, MAX_CALLS),
        "bare": lambda w, s: bare_concurrent(url, w, CONCURRENCY, s),
    }
    seconds = {"tritonclient": triton_s, "bare": bare_s}
    cells = [Cell(m, d) for d in DRIVERS for m in workloads]
    stats_client = httpclient.InferenceServerClient(url)
    try:
        for cell in cells:
            drivers[cell.driver](workloads[cell.model], 0.3)
        for index in range(rounds):
            shift = index % len(cells)
            for cell in cells[shift:] + cells[:shift]:
                _take(
                    cell,
                    drivers[cell.driver],
                    workloads[cell.model],
                    seconds[cell.driver],
                    stats_client,
                    daemon_pid,
                )
            log(
                f"  round {index + 1}/{rounds} requests/s: "
                + ", ".join(
                    f"{c.model.removeprefix('lane_')} {c.driver[0]} {c.rounds[-1].rate_per_s:.0f}"
                    for c in cells
                )
            )
    finally:
        stats_client.close()
    per_round = {
        driver: {
            model: _per_round(cells, model, driver) for model in workloads if model != UNBATCHED
        }
        for driver in DRIVERS
    }
    ratios = {
        driver: {model: statistics.median(r) for model, r in by_model.items()}
        for driver, by_model in per_round.items()
    }
    per_cpu = {
        driver: {
            model: statistics.median(_per_round(cells, model, driver, per_cpu=True))
            for model in by_model
        }
        for driver, by_model in per_round.items()
    }
    figures = {
        "concurrency": CONCURRENCY,
        "rounds": rounds,
        "seconds_per_measurement": seconds,
        "onnxruntime_in_process": floor,
        "cells": {f"{c.model} via {c.driver}": c.as_dict() for c in cells},
        "ratio_to_unbatched": {
            d: {m: round(r, 3) for m, r in by_model.items()} for d, by_model in ratios.items()
        },
        "ratio_to_unbatched_per_round": {
            d: {m: [round(x, 3) for x in r] for m, r in by_model.items()}
            for d, by_model in per_round.items()
        },
        "requests_per_cpu_second_ratio_to_unbatched": {
            d: {m: round(r, 3) for m, r in by_model.items()} for d, by_model in per_cpu.items()
        },
    }
    bounds = {driver: gain_bound(cells, floor, driver) for driver in DRIVERS}
    figures["most_gain_batching_allows_when_cpu_bound"] = {
        d: round(b, 3) for d, b in bounds.items()
    }
    print_table(cells, ratios, per_round, per_cpu, floor)
    print(
        "The most batching could gain here if the cores are the limit (every request in a\n"
        "batch of 8, saving its share of ONNX Runtime's CPU, less the concatenation): "
        + ", ".join(f"{d} {b:.2f}x" for d, b in bounds.items())
        + "\n"
    )
    return figures, [target(cells, ratios, per_cpu, floor, bounds)]


def _per_round(cells: list[Cell], model: str, driver: str, per_cpu: bool = False) -> list[float]:
    """Per round, ``model``'s requests/s over ``lane_unbatched``'s through the
    same driver; with ``per_cpu``, requests per CPU second of this process and
    the daemon together instead, which other processes on the machine do not
    move."""
    batched, plain = _cell(cells, model, driver), _cell(cells, UNBATCHED, driver)
    if per_cpu:
        return [
            (pc + pd) / (bc + bd)
            for bc, bd, pc, pd in zip(
                batched.client_cpu_us,
                batched.daemon_cpu_us,
                plain.client_cpu_us,
                plain.daemon_cpu_us,
                strict=True,
            )
        ]
    return [b.rate_per_s / u.rate_per_s for b, u in zip(batched.rounds, plain.rounds, strict=True)]


def _cell(cells: list[Cell], model: str, driver: str) -> Cell:
    return next(c for c in cells if c.model == model and c.driver == driver)


def _take(cell: Cell, driver, workload: Workload, seconds: float, stats_client, pid: int) -> None:
    parts_before, batches_before, ns_before = _stats(stats_client, cell.model)
    client_before = process_cpu_s(os.getpid())
    daemon_before = process_cpu_s(pid)
    machine_before = machine_ticks()
    wall_before = time.perf_counter()
    result = driver(workload, seconds)
    wall = time.perf_counter() - wall_before
    machine_after = machine_ticks()
    client_after = process_cpu_s(os.getpid())
    daemon_after = process_cpu_s(pid)
    parts_after, batches_after, ns_after = _stats(stats_client, cell.model)
    cell.rounds.append(result)
    if None not in (client_before, client_after, daemon_before, daemon_after):
        cell.client_cpu_us.append((client_after - client_before) / result.calls * 1e6)
        cell.daemon_cpu_us.append((daemon_after - daemon_before) / result.calls * 1e6)
        if machine_before is not None and machine_after is not None:
            ours = (client_after - client_before + daemon_after - daemon_before) / wall
            busy, steal = (
                (machine_after[i] - machine_before[i]) / _TICKS_PER_S / wall for i in range(2)
            )
            cell.cores.append((ours, busy, steal))
    cell.batches.update(batches_after)
    cell.batches.subtract(batches_before)
    cell.batches = +cell.batches
    cell.batch_infer_ns.update(ns_after)
    cell.batch_infer_ns.subtract(ns_before)
    cell.batch_infer_ns = +cell.batch_infer_ns
    for part in _PARTS:
        total = cell.inside.setdefault(part, [0, 0])
        total[0] += parts_after[part][0] - parts_before[part][0]
        total[1] += parts_after[part][1] - parts_before[part][1]


_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_ticks() -> tuple[int, int] | None:
    """(busy, stolen) clock ticks of all CPUs so far, from ``/proc/stat``;
    busy is user, nice, system, irq and softirq time."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return user + nice + system + irq + softirq, steal


def gain_bound(cells: list[Cell], floor: dict, driver: str) -> float:
    """The most batching could raise requests/s through ``driver`` on a
    machine whose cores are the limit: every request batched by 8, each saving
    its share of what ONNX Runtime's batch-8 run saves in CPU time over eight
    batch-1 runs, less its share of the concatenation; against the CPU that
    clients and daemon spent per unbatched request."""
    plain = _cell(cells, UNBATCHED, driver)
    if not plain.client_cpu_us:
        return float("nan")
    spent_ms = (
        statistics.median(plain.client_cpu_us) + statistics.median(plain.daemon_cpu_us)
    ) / 1e3
    saved_ms = (
        floor["eight_batch1_cpu_ms"]
        - floor["one_batch8_cpu_ms"]
        - floor["concatenate_8_inputs_cpu_ms"]
    ) / MAX_BATCH
    return spent_ms / (spent_ms - saved_ms) if saved_ms < spent_ms else float("inf")


def best_delay(ratios: dict[str, dict[str, float]]) -> str:
    """The batched model with the highest tritonclient ratio."""
    return max(ratios["tritonclient"], key=ratios["tritonclient"].get)


def target(
    cells: list[Cell],
    ratios: dict[str, dict[str, float]],
    per_cpu: dict[str, dict[str, float]],
    floor: dict,
    bounds: dict[str, float],
):
    """(name, passed, text, ratio) for the issue's batching target."""
    best = best_delay(ratios)
    ratio = ratios["tritonclient"][best]
    batched, plain = _cell(cells, best, "tritonclient"), _cell(cells, UNBATCHED, "tritonclient")
    rates = [Summary.of(c.rounds).rate_per_s for c in (batched, plain)]
    others = ", ".join(
        f"{m.removeprefix('lane_batched_')} {r:.2f}"
        for m, r in ratios["tritonclient"].items()
        if m != best
    )
    bare = ratios["bare"][best]
    text = (
        f"{best}: {rates[0]:.0f}/s vs lane_unbatched {rates[1]:.0f}/s (median per-round ratio "
        f"{ratio:.2f}, needs >= {TARGET_RATIO}; other delays {others}; mean batch "
        f"{mean_batch(batched.batches):.1f}; requests per CPU second "
        f"{per_cpu['tritonclient'][best]:.2f}x; bare-socket clients: {bare:.2f}; ONNX Runtime "
        f"batch 8 vs 8 x batch 1 in-process: {floor['gain']:.2f}x, which caps the gain at "
        f"{bounds['tritonclient']:.2f}x while the cores are the limit)"
    )
    return (
        f"lane c=8 dynamic batching requests/s >= {TARGET_RATIO} x unbatched",
        ratio >= TARGET_RATIO,
        text,
        round(ratio / TARGET_RATIO, 3),
    )


def print_table(
    cells: list[Cell], ratios: dict, per_round: dict, per_cpu: dict, floor: dict
) -> None:
    print(
        f"\n{'model':<20}{'driver':<13}{'per s':>6}{'p50 ms':>7}{'/unbatched':>11}{'range':>11}"
        f"{'per CPU':>8}{'CPU ms/req':>14}{'mean':>6}{'cores busy':>16}   "
        "executions by batch size; daemon mean ms"
    )
    print(f"{'':<76}{'client':>7}{'daemon':>7}{'batch':>6}{'ours':>6}{'all':>5}{'stol':>5}")
    for cell in cells:
        s = Summary.of(cell.rounds)
        ratio = ratios[cell.driver].get(cell.model)
        cpu_ratio = per_cpu[cell.driver].get(cell.model)
        spread = per_round[cell.driver].get(cell.model)
        spread_text = f"{min(spread):.2f}-{max(spread):.2f}" if spread else ""
        cpu = (
            f"{statistics.median(cell.client_cpu_us) / 1e3:>7.2f}"
            f"{statistics.median(cell.daemon_cpu_us) / 1e3:>7.2f}"
            if cell.client_cpu_us
            else f"{'':>14}"
        )
        sizes = " ".join(f"{k}:{v}" for k, v in sorted(cell.batches.items()))
        cores = (
            "".join(
                f"{statistics.median(c[i] for c in cell.cores):>{w}.2f}"
                for i, w in ((0, 6), (1, 5), (2, 5))
            )
            if cell.cores
            else f"{'':>16}"
        )
        inside = ""
        if cell.mean_us("success") is not None:
            inside = (
                f"; request {cell.mean_us('success') / 1e3:.1f}, "
                f"queue {cell.mean_us('queue') / 1e3:.1f}, "
                f"infer/request {_infer_per_request_ms(cell):.2f}"
            )
        print(
            f"{cell.model:<20}{cell.driver:<13}{s.rate_per_s:>6.0f}{s.p50_us / 1e3:>7.1f}"
            f"{'' if ratio is None else f'{ratio:.2f}':>11}{spread_text:>11}"
            f"{'' if cpu_ratio is None else f'{cpu_ratio:.2f}':>8}{cpu}"
            f"{mean_batch(cell.batches):>6.2f}{cores}   {sizes}{inside}"
        )
    print(
        "/unbatched: median per-round ratio of requests/s to lane_unbatched through the same\n"
        "driver; range: its lowest and highest round; per CPU: the same ratio of requests per\n"
        "CPU second of this process and the daemon (what neighbours on the machine do not move).\n"
        "'bare': 8 bare-socket clients sending tritonclient's bytes (diagnostic). cores busy:\n"
        "CPU seconds per second of this process and the daemon, of every process on the machine\n"
        "(/proc/stat), and stolen by the hypervisor; medians over rounds. daemon mean ms: its\n"
        "statistics; infer/request is ONNX Runtime's time per request, batches amortised.\n"
        f"ONNX Runtime in-process, daemon's options, wall (CPU) ms: 8 x batch 1 "
        f"{floor['eight_batch1_ms']:.2f} ({floor['eight_batch1_cpu_ms']:.2f}), 1 x batch 8 "
        f"{floor['one_batch8_ms']:.2f} ({floor['one_batch8_cpu_ms']:.2f}), concatenate "
        f"{floor['concatenate_8_inputs_ms']:.2f} ({floor['concatenate_8_inputs_cpu_ms']:.2f})"
    )


def _infer_per_request_ms(cell: Cell) -> float:
    """compute_infer adds each execution's time once and counts its requests,
    so its mean is ONNX Runtime's time per request, batching amortised."""
    return (cell.mean_us("compute_infer") or 0.0) / 1e3
