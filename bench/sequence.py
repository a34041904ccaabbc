"""Issue 13: what the sequence batcher costs, against the same model served
without it, on a daemon of its own (``bench/out/sequence/``).

Two pairs of models, each pair one ONNX file (``scripts/sequence_onnx.py``'s
builders) under two configs:

- ``seq_simple``: Triton's ``simple_sequence`` (OUTPUT = (INPUT + START) *
  READY) under ``sequence_batching`` with the ``direct`` strategy; the
  scheduler adds START and READY. Its floor ``seq_simple_plain`` declares
  START and READY as ordinary inputs, so the client sends them itself and the
  request takes the direct scheduler: the same ONNX work and nearly the same
  bytes, with no sequence bookkeeping.
- ``seq_state``: the implicit-state accumulator, whose state the scheduler
  keeps between requests. Its floor ``seq_state_plain`` declares INPUT_STATE
  as an input and OUTPUT_STATE as an output, so the client carries the state.

A diagnostic third config of the first file, ``seq_simple_dyna``, is
``seq_simple_plain`` with ``dynamic_batching { }``: its requests too are
handed to a worker thread and batched, with no sequence bookkeeping, so it
tells the thread hand-off's share of the cost from the sequence batcher's own.

All have ``max_batch_size: 8`` and one CPU instance, so at concurrency 8 the
``direct`` strategy can batch the 8 sequences (one slot each) while the floor,
with no ``dynamic_batching``, runs its 8 clients' requests one at a time.

Each client (one ``tritonclient.http`` connection, binary tensors) drives one
sequence of INPUT = 1: an untimed first request with START, the timed loop,
then an untimed last request (``sequence_end`` on the sequence models). Every
answer is checked (2 then 1 for ``simple_sequence``, the running count for the
accumulator), on both models of a pair alike. Rounds are interleaved: each
round takes every cell (model x concurrency 1 and 8) once, in an order rotated
each round, each with fresh sequences. Targets, per pair, judged on the median
of per-round ratios: c=1 p50 sequence / floor <= 1.25 and c=8 requests/s
sequence / floor >= 0.9. The daemon's ``batch_stats`` say which batch sizes
ran (the direct strategy's padding rows included), and the CPU both processes
spend per request says where a difference goes on a 2-core machine.
"""

from __future__ import annotations

import itertools
import os
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from bench.cpu_time import process_cpu_s
from bench.latency import Round, Summary, closed_loops
from daemon_process import DaemonProcess
from scripts.sequence_onnx import build_implicit_accumulator, build_simple_sequence

PAIRS = {"seq_simple": "seq_simple_plain", "seq_state": "seq_state_plain"}
"""Sequence model -> its floor."""
HANDOFF = "seq_simple_dyna"
"""Diagnostic: the floor's config with ``dynamic_batching``; no target."""
CONCURRENCIES = (1, 8)
MAX_BATCH = 8
LATENCY_TARGET = 1.25
RATE_TARGET = 0.9
MAX_CALLS = 200_000

_TENSOR = '    {{ name: "{name}" data_type: TYPE_INT32 dims: [ 1 ] }}'


def _plain_config(name: str, inputs: list[str], outputs: list[str]) -> str:
    def block(names: list[str]) -> str:
        return ",\n".join(_TENSOR.format(name=n) for n in names)

    return (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {MAX_BATCH}\n'
        f"input [\n{block(inputs)}\n]\noutput [\n{block(outputs)}\n]\n"
        "instance_group [ { kind: KIND_CPU } ]\n"
        + ("dynamic_batching { }\n" if name == HANDOFF else "")
    )


def prepare(folder: Path) -> Path:
    """Writes the five models under ``folder/repository`` (replacing what was
    there) and returns that repository."""
    root = folder / "repository"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    floors = {
        "seq_simple_plain": (["INPUT", "START", "READY"], ["OUTPUT"]),
        "seq_state_plain": (["INPUT", "START", "READY", "INPUT_STATE"], ["OUTPUT", "OUTPUT_STATE"]),
    }
    build_simple_sequence(root / "seq_simple")
    build_implicit_accumulator(root / "seq_state")
    for model, plain in PAIRS.items():
        (root / plain / "1").mkdir(parents=True)
        shutil.copyfile(root / model / "1" / "model.onnx", root / plain / "1" / "model.onnx")
        (root / plain / "config.pbtxt").write_text(_plain_config(plain, *floors[plain]))
    (root / HANDOFF / "1").mkdir(parents=True)
    shutil.copyfile(root / "seq_simple" / "1" / "model.onnx", root / HANDOFF / "1" / "model.onnx")
    (root / HANDOFF / "config.pbtxt").write_text(
        _plain_config(HANDOFF, *floors["seq_simple_plain"])
    )
    return root


# -- one client, one sequence ------------------------------------------------------


def _int32(value: int) -> np.ndarray:
    return np.full((1, 1), value, dtype=np.int32)


def _tensor(name: str, value: int) -> httpclient.InferInput:
    tensor = httpclient.InferInput(name, [1, 1], "INT32")
    tensor.set_data_from_numpy(_int32(value), binary_data=True)
    return tensor


class SequenceClient:
    """One connection driving one sequence of ``model``, used by one thread.
    On a sequence model the daemon adds the controls and keeps the state; on a
    floor the client sends START/READY (and INPUT_STATE) itself. ``call``
    raises AssertionError on a wrong answer, which aborts the round."""

    _ids = itertools.count(1)

    def __init__(self, url: str, model: str) -> None:
        self.model = model
        self.sequence = model in PAIRS
        self.stateful = model.startswith("seq_state")
        self.sequence_id = next(self._ids)
        self._client = httpclient.InferenceServerClient(
            url, connection_timeout=30, network_timeout=60
        )
        self._input = _tensor("INPUT", 1)
        self._controls = {start: [_tensor("START", start), _tensor("READY", 1)] for start in (0, 1)}
        self._state_in = httpclient.InferInput("INPUT_STATE", [1, 1], "INT32")
        names = ["OUTPUT"] + (["OUTPUT_STATE"] if self.stateful and not self.sequence else [])
        self._outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in names]
        self._count = 0
        self._state = 0

    def _send(self, end: bool = False) -> None:
        start = self._count == 0
        if self.sequence:
            result = self._client.infer(
                self.model,
                [self._input],
                outputs=self._outputs,
                sequence_id=self.sequence_id,
                sequence_start=start,
                sequence_end=end,
            )
        else:
            inputs = [self._input, *self._controls[int(start)]]
            if self.stateful:
                self._state_in.set_data_from_numpy(_int32(self._state), binary_data=True)
                inputs.append(self._state_in)
            result = self._client.infer(self.model, inputs, outputs=self._outputs)
        self._count += 1
        got = int(result.as_numpy("OUTPUT")[0, 0])
        want = self._count if self.stateful else (2 if start else 1)
        if got != want:
            raise AssertionError(
                f"model '{self.model}' sequence {self.sequence_id} request {self._count}: "
                f"expected OUTPUT {want}, got {got}"
            )
        if self.stateful and not self.sequence:
            self._state = int(result.as_numpy("OUTPUT_STATE")[0, 0])

    def call(self) -> None:
        self._send()

    def close(self) -> None:
        try:
            self._send(end=True)
        finally:
            self._client.close()


# -- cells and rounds -----------------------------------------------------------


@dataclass
class Cell:
    model: str
    concurrency: int
    rounds: list[Round] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    daemon_cpu_us: list[float] = field(default_factory=list)
    """Per round, CPU time of this process (the clients) and of the daemon,
    per request."""
    inside: Counter = field(default_factory=Counter)
    """Daemon statistics summed over rounds: part -> ns, part + '#' -> count."""
    batches: Counter = field(default_factory=Counter)
    """Executions by batch size, summed over rounds (daemon's batch_stats)."""

    @property
    def key(self) -> str:
        return f"{self.model} c={self.concurrency}"


_PARTS = ("success", "queue", "compute_infer")


def _stats(client: httpclient.InferenceServerClient, model: str) -> tuple[Counter, Counter]:
    """(executions by batch size, part -> ns and part# -> count) so far."""
    stats = client.get_inference_statistics(model)["model_stats"][0]
    batches = Counter(
        {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
    )
    inference = stats["inference_stats"]
    parts = Counter()
    for part in _PARTS:
        parts[part] = int(inference[part]["ns"])
        parts[part + "#"] = int(inference[part]["count"])
    return batches, parts


def _take(cell: Cell, url: str, seconds: float, stats, pid: int) -> None:
    batches_before, parts_before = _stats(stats, cell.model)
    cpu_before = (process_cpu_s(os.getpid()), process_cpu_s(pid))
    result = closed_loops(
        cell.concurrency, seconds, MAX_CALLS, _opener(url, cell.model), cell.model
    )
    cpu_after = (process_cpu_s(os.getpid()), process_cpu_s(pid))
    batches, parts = _stats(stats, cell.model)
    batches.subtract(batches_before)
    cell.batches.update(+batches)
    parts.subtract(parts_before)
    cell.inside.update(parts)
    cell.rounds.append(result)
    for before, after, into in zip(
        cpu_before, cpu_after, (cell.client_cpu_us, cell.daemon_cpu_us), strict=True
    ):
        if before is not None and after is not None:
            into.append((after - before) / result.calls * 1e6)


def _ratios(cells: dict[str, Cell], model: str, concurrency: int) -> list[float]:
    ours = cells[f"{model} c={concurrency}"].rounds
    floor = cells[f"{PAIRS.get(model, 'seq_simple_plain')} c={concurrency}"].rounds
    if concurrency == 1:
        return [o.p50_us / f.p50_us for o, f in zip(ours, floor, strict=True)]
    return [o.rate_per_s / f.rate_per_s for o, f in zip(ours, floor, strict=True)]


def _mean_us(cell: Cell, part: str) -> float:
    count = cell.inside[part + "#"]
    return cell.inside[part] / count / 1e3 if count else float("nan")


def _cpu(cell: Cell) -> float:
    """Median CPU microseconds per request, this process and the daemon."""
    if not cell.client_cpu_us or not cell.daemon_cpu_us:
        return float("nan")
    return statistics.median(cell.client_cpu_us) + statistics.median(cell.daemon_cpu_us)


def _mean_batch(batches: Counter) -> float:
    runs = sum(batches.values())
    return sum(size * n for size, n in batches.items()) / runs if runs else 0.0


def measure(
    folder: Path,
    rounds: int,
    c1_s: float,
    c8_s: float,
    log: Callable[[str], None] = print,
) -> tuple[dict, list]:
    """Returns (figures for results.json, targets as (name, passed, text,
    ratio)). The daemon's log is ``folder/daemon.log``."""
    repository = prepare(folder)
    daemon = DaemonProcess(repository, folder / "daemon.log", [])
    daemon.start()
    cells = {
        c.key: c
        for c in (
            Cell(model, concurrency)
            for concurrency in CONCURRENCIES
            for model in (*itertools.chain(*PAIRS.items()), HANDOFF)
        )
    }
    order = list(cells.values())
    try:
        stats = httpclient.InferenceServerClient(daemon.url, connection_timeout=30)
        pid = daemon.process.pid
        for cell in order:
            closed_loops(cell.concurrency, 0.3, MAX_CALLS, _opener(daemon.url, cell.model), "warm")
        log(f"  warmed up; every answer checked; {rounds} rounds of {len(order)} cells")
        started = time.perf_counter()
        for index in range(rounds):
            shift = index % len(order)
            for cell in order[shift:] + order[:shift]:
                _take(cell, daemon.url, c1_s if cell.concurrency == 1 else c8_s, stats, pid)
            log(
                f"  round {index + 1}: "
                + ", ".join(
                    f"{c.key} "
                    + (
                        f"p50 {c.rounds[-1].p50_us:.0f} us"
                        if c.concurrency == 1
                        else f"{c.rounds[-1].rate_per_s:.0f}/s"
                    )
                    for c in order
                )
            )
        stats.close()
        elapsed = time.perf_counter() - started
    finally:
        code = daemon.stop()
        if code != 0:
            log(f"  sequence daemon exited with {code}; see {daemon.log_path}")
    return _report(cells, rounds, elapsed, log)


def _opener(url: str, model: str):
    def open_client(_index: int):
        client = SequenceClient(url, model)
        return client.call, client.close

    return open_client


def _report(
    cells: dict[str, Cell], rounds: int, elapsed_s: float, log: Callable[[str], None]
) -> tuple[dict, list]:
    log(
        f"\n{'cell':<22}{'p50 us':>7}{'p99 us':>7}{'per s':>6}{'CPU us/req':>14}"
        f"{'daemon us':>15}{'mean':>6}   executions by batch size"
    )
    log(f"{'':<42}{'client':>7}{'daemon':>7}{'request':>8}{'queue':>7}{'batch':>6}")
    figures: dict = {"rounds": rounds, "seconds": round(elapsed_s, 1), "cells": {}}
    for cell in cells.values():
        s = Summary.of(cell.rounds)
        client, daemon = (
            statistics.median(values) if values else float("nan")
            for values in (cell.client_cpu_us, cell.daemon_cpu_us)
        )
        request, queue = _mean_us(cell, "success"), _mean_us(cell, "queue")
        sizes = " ".join(f"{k}:{v}" for k, v in sorted(cell.batches.items()))
        log(
            f"{cell.key:<22}{s.p50_us:>7.0f}{s.p99_us:>7.0f}{s.rate_per_s:>6.0f}"
            f"{client:>7.0f}{daemon:>7.0f}{request:>8.0f}{queue:>7.0f}"
            f"{_mean_batch(cell.batches):>6.2f}   {sizes}"
        )
        figures["cells"][cell.key] = {
            **s.as_dict(),
            "client_cpu_us_per_request": round(client, 1),
            "daemon_cpu_us_per_request": round(daemon, 1),
            "daemon_request_us": round(request, 1),
            "daemon_queue_us": round(queue, 1),
            "batches": {str(k): v for k, v in sorted(cell.batches.items())},
        }
    targets = []
    figures["ratios"] = {}
    for concurrency in CONCURRENCIES:
        per_round = _ratios(cells, HANDOFF, concurrency)
        figures["ratios"][f"{HANDOFF} c={concurrency}"] = [round(r, 3) for r in per_round]
        log(
            f"diagnostic {HANDOFF} / seq_simple_plain c={concurrency} "
            f"{'p50' if concurrency == 1 else 'requests/s'}: median per-round ratio "
            f"{statistics.median(per_round):.3f} (rounds {min(per_round):.2f}-"
            f"{max(per_round):.2f})"
        )
    for model, floor in PAIRS.items():
        for concurrency in CONCURRENCIES:
            per_round = _ratios(cells, model, concurrency)
            ratio = statistics.median(per_round)
            figures["ratios"][f"{model} c={concurrency}"] = [round(r, 3) for r in per_round]
            ours, plain = cells[f"{model} c={concurrency}"], cells[f"{floor} c={concurrency}"]
            spread = f"rounds {min(per_round):.2f}-{max(per_round):.2f}"
            if concurrency == 1:
                a, b = Summary.of(ours.rounds).p50_us, Summary.of(plain.rounds).p50_us
                targets.append(
                    (
                        f"{model} c=1 p50 <= {LATENCY_TARGET} x {floor}",
                        ratio <= LATENCY_TARGET,
                        f"{a:.0f} vs {b:.0f} us, median per-round ratio {ratio:.3f} ({spread})",
                        round(ratio / LATENCY_TARGET, 3),
                    )
                )
            else:
                a, b = Summary.of(ours.rounds).rate_per_s, Summary.of(plain.rounds).rate_per_s
                per_cpu = _cpu(plain) / _cpu(ours)
                targets.append(
                    (
                        f"{model} c=8 requests/s >= {RATE_TARGET} x {floor}",
                        ratio >= RATE_TARGET,
                        f"{a:.0f} vs {b:.0f}/s, median per-round ratio {ratio:.3f} ({spread}); "
                        f"mean batch {_mean_batch(ours.batches):.2f} vs "
                        f"{_mean_batch(plain.batches):.2f}; requests per CPU second of both "
                        f"processes {per_cpu:.2f}x",
                        round(ratio / RATE_TARGET, 3),
                    )
                )
    return figures, targets
