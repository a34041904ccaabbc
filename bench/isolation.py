"""Issue 9: what running a python model in its own process costs, against
running it in the daemon (``EDGEBOX_ISOLATION`` ``process`` vs ``in_process``).

The demo's python models are measured, each served twice by one daemon, once
per mode, from the same ``model.py``: ``multiply`` (two [1, 16] FP32 tensors:
all overhead), ``lane_preprocess`` (a 640x360 BGR frame in, the detector's
2.8 MB FP32 tensor out) and ``lane_postprocess`` (the detector's 0.86 MB of
proposals in, a few lanes out), and ``lane_pipeline`` end to end with both
python steps isolated or both in-process (its ``lane_detector`` is ONNX and
the same in both). ``add_sub`` is an ONNX model and has no python to isolate.

Per round, every cell runs once for its time, in an order rotated each round,
through ``tritonclient.http`` at concurrency 1 (binary tensors). Figures are
medians of per-round values; the cost of isolation is the median per-round
ratio of the isolated p50 to the in-process p50, and the difference in the
daemon's own ``compute_infer`` time (the instance's ``execute``, without HTTP).
Before timing, each isolated model must answer exactly what its in-process
twin answers.

Then the price of a crash: the isolated ``multiply``'s process is killed
with SIGSEGV a few times and the time until it answers again is taken; and
the memory each isolated process holds (its resident set).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from bench.cpu_time import process_cpu_s
from bench.latency import Round, Summary, timed_calls
from edgebox.streams.synthetic_road import SyntheticRoad

ROOT = Path(__file__).resolve().parents[1]
DEMO_REPOSITORY = ROOT / "model_repository"
PYTHON_MODELS = ("multiply", "lane_preprocess", "lane_postprocess")
PIPELINE = "lane_pipeline"
DETECTOR = "lane_detector"
SUFFIX = "_process"
MODES = ("in_process", "process")
MEASURED = (*PYTHON_MODELS, PIPELINE)
SECONDS = {"multiply": 0.5, "lane_preprocess": 1.0, "lane_postprocess": 1.0, PIPELINE: 2.0}
"""Seconds per cell per round, before the plan's scale."""
ISOLATED = '\nparameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }\n'
CRASHES = 3
MAX_CALLS = 100_000


def served_name(model: str, mode: str) -> str:
    return model if mode == "in_process" else model + SUFFIX


def prepare(folder: Path) -> Path:
    """The bench repository: the demo's python models and lane pipeline as
    they are (in-process, the daemon's default), and an isolated copy of each
    python model and of the pipeline (its steps pointing at the copies)."""
    repository = folder / "repository"
    if repository.exists():
        shutil.rmtree(repository)
    repository.mkdir(parents=True)
    for name in (*PYTHON_MODELS, PIPELINE, DETECTOR):
        source = DEMO_REPOSITORY / name
        if not (source / "config.pbtxt").is_file():
            raise SystemExit(f"isolation bench: '{source}' is missing")
        shutil.copytree(source, repository / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in PYTHON_MODELS:
        copy = repository / served_name(name, "process")
        shutil.copytree(repository / name, copy)
        config = (copy / "config.pbtxt").read_text()
        config = config.replace(f'name: "{name}"', f'name: "{copy.name}"') + ISOLATED
        (copy / "config.pbtxt").write_text(config)
    pipeline = repository / served_name(PIPELINE, "process")
    shutil.copytree(repository / PIPELINE, pipeline)
    config = (pipeline / "config.pbtxt").read_text().replace(
        f'name: "{PIPELINE}"', f'name: "{pipeline.name}"'
    )
    for step in ("lane_preprocess", "lane_postprocess"):
        config = config.replace(f'model_name: "{step}"', f'model_name: "{step}{SUFFIX}"')
    (pipeline / "config.pbtxt").write_text(config)
    detector = repository / DETECTOR / "1" / "model.onnx"
    if not detector.exists():
        sys.path.insert(0, str(ROOT))
        from scripts.lane_detector import build_lane_detector

        build_lane_detector(detector)
    return repository


@dataclass
class Cell:
    rounds: list[Round] = field(default_factory=list)
    compute_us: list[float] = field(default_factory=list)
    """Per round, the daemon's mean ``compute_infer`` per request."""
    daemon_cpu_us: list[float] = field(default_factory=list)
    """Per round, CPU per request of the daemon and its model processes."""


def measure(
    url: str,
    daemon_pid: int,
    rounds: int,
    scale: float,
    log: Callable[[str], None],
) -> tuple[dict, list[tuple]]:
    """The cells, the crash recovery and the memory; the figures for
    results.json (no target: the numbers decide the default, see RESULTS.md)."""
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=120)
    try:
        inputs = _inputs(client)
        for model in MEASURED:
            _check_same_answers(client, model, inputs[model])
        cells = {(model, mode): Cell() for model in MEASURED for mode in MODES}
        keys = list(cells)
        for model, mode in keys:
            _call(client, served_name(model, mode), inputs[model])()
        for index in range(rounds):
            shift = index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                model, mode = key
                _take(cells[key], client, served_name(model, mode), inputs[model],
                      SECONDS[model] * scale, daemon_pid)
            log(
                f"  round {index + 1}/{rounds} p50 us: "
                + ", ".join(
                    f"{model} {cells[(model, 'in_process')].rounds[-1].p50_us:.0f}/"
                    f"{cells[(model, 'process')].rounds[-1].p50_us:.0f}"
                    for model in MEASURED
                )
            )
        recovery = _crash_recovery(client, daemon_pid, inputs["multiply"], log)
        memory = _process_memory(daemon_pid)
    finally:
        client.close()
    return _report(cells, recovery, memory, log), []


def _inputs(client) -> dict[str, list[httpclient.InferInput]]:
    """One request per model: the same frame for the pre-processing and the
    pipeline, and the detector's answer to it for the post-processing."""
    frame = SyntheticRoad(seed=7, width=640, height=360).next_frame().image
    image = _tensor("image", frame)
    detected = client.infer(
        DETECTOR,
        [_tensor("input", client.infer("lane_preprocess", [image]).as_numpy("input"))],
    ).as_numpy("predict_lanes")
    return {
        "multiply": [
            _tensor("A", np.arange(16, dtype=np.float32).reshape(1, 16)),
            _tensor("B", np.full((1, 16), 0.5, np.float32)),
        ],
        "lane_preprocess": [image],
        "lane_postprocess": [
            _tensor("predict_lanes", detected),
            _tensor("frame_size", np.array(frame.shape[:2], np.int32)),
        ],
        PIPELINE: [image],
    }


def _tensor(name: str, array: np.ndarray) -> httpclient.InferInput:
    datatype = {np.float32: "FP32", np.uint8: "UINT8", np.int32: "INT32"}[array.dtype.type]
    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=True)
    return tensor


def _call(client, model: str, inputs: list) -> Callable[[], object]:
    return lambda: client.infer(model, inputs)


def _check_same_answers(client, model: str, inputs: list) -> None:
    ours = client.infer(served_name(model, "in_process"), inputs)
    isolated = client.infer(served_name(model, "process"), inputs)
    for output in ours.get_response()["outputs"]:
        name = output["name"]
        if not np.array_equal(ours.as_numpy(name), isolated.as_numpy(name)):
            raise AssertionError(
                f"isolation bench: '{served_name(model, 'process')}' output '{name}' differs "
                f"from '{model}''s"
            )


def _take(cell: Cell, client, model: str, inputs: list, seconds: float, daemon_pid: int) -> None:
    before = _compute(client, model)
    cpu_before = _cpu_s(daemon_pid)
    result = timed_calls(_call(client, model, inputs), seconds, MAX_CALLS)
    cpu_after = _cpu_s(daemon_pid)
    after = _compute(client, model)
    cell.rounds.append(result)
    count, ns = after[0] - before[0], after[1] - before[1]
    if count:
        cell.compute_us.append(ns / count / 1e3)
    cell.daemon_cpu_us.append((cpu_after - cpu_before) / result.calls * 1e6)


def _compute(client, model: str) -> tuple[int, int]:
    stats = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    return stats["compute_infer"]["count"], stats["compute_infer"]["ns"]


def _model_processes(daemon_pid: int) -> dict[int, str]:
    """pid -> label of the daemon's isolated model processes."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ppid == daemon_pid and b"edgebox.backends.python.isolated_child" in command:
            label = command[command.index(b"--label") + 1].decode()
            found[int(entry.name)] = label
    return found


def _cpu_s(daemon_pid: int) -> float:
    """CPU of the daemon and its model processes."""
    return sum(process_cpu_s(pid) or 0.0 for pid in (daemon_pid, *_model_processes(daemon_pid)))


def _crash_recovery(client, daemon_pid: int, inputs: list, log) -> list[float]:
    """Seconds from SIGSEGV to the isolated multiply's next answer, for
    crashes one after another: each waits a longer restart backoff (0.5 s,
    1 s, 2 s), so the first is what a model that crashes once costs."""
    model = served_name("multiply", "process")
    seconds = []
    for _ in range(CRASHES):
        (pid,) = [p for p, label in _model_processes(daemon_pid).items() if f"'{model}'" in label]
        started = time.monotonic()
        os.kill(pid, signal.SIGSEGV)
        while time.monotonic() < started + 60:
            try:
                client.infer(model, inputs)
            except InferenceServerException:
                time.sleep(0.01)
                continue
            if pid not in _model_processes(daemon_pid):
                break
            time.sleep(0.01)
        seconds.append(time.monotonic() - started)
    log(f"  SIGSEGV -> next answer, crash after crash, s: {', '.join(f'{s:.2f}' for s in seconds)}")
    return seconds


def _process_memory(daemon_pid: int) -> dict[str, float]:
    """Resident MB of each isolated model process."""
    memory = {}
    for pid, label in _model_processes(daemon_pid).items():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        if match:
            memory[label] = round(int(match.group(1)) / 1024, 1)
    return memory


def _report(
    cells: dict[tuple[str, str], Cell], recovery: list[float], memory: dict, log
) -> dict:
    log(
        f"\n{'model':<18}{'mode':<12}{'p50 us':>9}{'p99 us':>10}{'per s':>8}{'p50 range':>15}"
        f"{'execute us':>12}{'CPU us/req':>12}   isolated/in-process p50 (median per round)"
    )
    figures: dict = {"cells": {}, "isolated_over_in_process_p50": {}, "added_execute_us": {}}
    for model in MEASURED:
        base = cells[(model, "in_process")]
        for mode in MODES:
            cell = cells[(model, mode)]
            s = Summary.of(cell.rounds)
            execute = statistics.median(cell.compute_us) if cell.compute_us else float("nan")
            cpu = statistics.median(cell.daemon_cpu_us)
            ratio = ""
            if mode == "process":
                value = statistics.median(
                    r.p50_us / b.p50_us for r, b in zip(cell.rounds, base.rounds, strict=True)
                )
                added = statistics.median(
                    c - b for c, b in zip(cell.compute_us, base.compute_us, strict=False)
                )
                figures["isolated_over_in_process_p50"][model] = round(value, 3)
                figures["added_execute_us"][model] = round(added, 1)
                ratio = f"{value:.2f} (execute +{added:.0f} us)"
            log(
                f"{model:<18}{mode:<12}{s.p50_us:>9.0f}{s.p99_us:>10.0f}{s.rate_per_s:>8.0f}"
                f"{f'{s.p50_low_us:.0f}-{s.p50_high_us:.0f}':>15}{execute:>12.0f}{cpu:>12.0f}"
                f"   {ratio}"
            )
            figures["cells"][f"{model} {mode}"] = {
                **s.as_dict(),
                "execute_mean_us": round(execute, 1),
                "daemon_and_model_processes_cpu_us_per_request": round(cpu, 1),
            }
    log(
        "execute us: the daemon's compute_infer per request (the instance's execute, no HTTP);\n"
        "CPU us/req: the daemon and its model processes together."
    )
    figures["crash_to_next_answer_s"] = [round(s, 3) for s in recovery]
    figures["model_process_rss_mb"] = memory
    if memory:
        log(
            "resident memory per model process, MB: "
            + ", ".join(f"{label} {mb:.0f}" for label, mb in sorted(memory.items()))
        )
    return figures
