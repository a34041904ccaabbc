"""Issue 4: frames per second of a whole stream (capture -> preprocess -> model
-> postprocess -> result) against the detector alone, as a ratio.

The bench repository (``bench/out/stream/repository``) gets the demo's
``lane_pipeline`` ensemble and its three steps, copied from
``model_repository/`` (``lane_detector``'s ``model.onnx`` is copied if the demo
repository has it built, else built with ``scripts/lane_detector.py``). They
are served in this process by the daemon's own objects (registry, lifecycle
manager, dataplane, real backends), and the stream runs in this process as it
does in the daemon: a ``StreamManager`` with one stream, results read off the
event bus.

* **stream (file)**, the measurement: an MJPG ``.avi`` of ``FRAMES`` synthetic
  road frames (640x360, rendered and written before timing; the file plays in
  a loop), ``fps: 0``, so the capture thread decodes one frame ahead of the
  model and every frame is inferred. Results/s over the round, after a warm-up.
* **detector alone**, the floor: ``DataPlane.infer`` on ``lane_detector`` with
  the preprocessed tensor of one of those frames, back to back on one thread.
* **pipeline alone**, a diagnostic: ``DataPlane.infer`` on ``lane_pipeline``
  with one frame, back to back, no stream: the ensemble's cost without capture.
  Two frames in flight, the stream's default.
* **stream (1 in flight)**, a diagnostic: the same with ``in_flight: 1``,
  one frame after another.
* **stream (synthetic)**, a diagnostic: the same stream on ``synthetic:road``,
  which renders each frame in the capture thread.

Rounds take every measurement once, in an order rotated each round; the target
is judged on the median per-round ratio of stream (file) results/s to detector
calls/s. The dataplane's statistics give each step's compute time per frame
during the stream rounds, and this process's CPU time per frame is recorded:
on a machine with few cores the capture thread, the python steps and ONNX
Runtime's threads share them. **per CPU** is the detector's CPU time per call
over the stream's CPU time per frame (median per round): what the stream path
costs on top of the model, which other processes on a shared machine cannot
move, unlike frames per second.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2

from bench.cpu_time import process_cpu_s
from bench.latency import timed_calls
from edgebox.backends import BackendCatalog
from edgebox.dataplane import DataPlane
from edgebox.events import EventBus, StreamResult
from edgebox.lifecycle.manager import LifecycleManager
from edgebox.lifecycle.registry import ModelRegistry
from edgebox.streams.manager import StreamManager
from edgebox.streams.settings import StreamSettings
from edgebox.streams.synthetic_road import SyntheticRoad
from edgebox.tensors import InferRequest, Tensor

PIPELINE = "lane_pipeline"
STEPS = ("lane_preprocess", "lane_detector", "lane_postprocess")
DETECTOR = "lane_detector"
FRAMES = 48
WIDTH, HEIGHT = 640, 360
TARGET_RATIO = 0.85
WARMUP_RESULTS = 3
MAX_CALLS = 100_000
MEASUREMENTS = (
    "detector alone",
    "pipeline alone",
    "stream (file)",
    "stream (1 in flight)",
    "stream (synthetic)",
)

ROOT = Path(__file__).resolve().parents[1]
DEMO_REPOSITORY = ROOT / "model_repository"


@dataclass
class Cell:
    """One measurement's per-round figures."""

    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    """This process's CPU time per frame (all threads)."""
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    """Stream rounds: mean of each latency part, per round."""
    step_ms: dict[str, list[float]] = field(default_factory=dict)
    """Stream rounds: each ensemble step's compute time per frame, per round."""
    lanes: list[float] = field(default_factory=list)
    """Stream rounds: mean lanes per result, to show the pipeline detects."""
    dropped: int = 0


def prepare(folder: Path) -> tuple[Path, Path]:
    """The bench repository and the road video, written under ``folder``."""
    repository = folder / "repository"
    if repository.exists():
        shutil.rmtree(repository)
    repository.mkdir(parents=True)
    for name in (PIPELINE, *STEPS):
        source = DEMO_REPOSITORY / name
        if not (source / "config.pbtxt").is_file():
            raise SystemExit(
                f"stream bench: '{source}' is missing; the stream benchmark needs the demo's "
                "lane_pipeline and its steps"
            )
        shutil.copytree(source, repository / name, ignore=shutil.ignore_patterns("__pycache__"))
    detector = repository / DETECTOR / "1" / "model.onnx"
    if not detector.exists():
        sys.path.insert(0, str(ROOT))
        from scripts.lane_detector import build_lane_detector

        build_lane_detector(detector)
    video = folder / "road.avi"
    road = SyntheticRoad(seed=7, width=WIDTH, height=HEIGHT)
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 15, (WIDTH, HEIGHT))
    if not writer.isOpened():
        raise SystemExit(f"stream bench: OpenCV cannot write '{video}'")
    for _ in range(FRAMES):
        writer.write(road.next_frame().image)
    writer.release()
    return repository, video


class _Stack:
    """The daemon's serving objects, in this process."""

    def __init__(self, repository: Path) -> None:
        self.bus = EventBus()
        self.registry = ModelRegistry(self.bus)
        self.manager = LifecycleManager(
            repository, self.registry, BackendCatalog(), infer=lambda r: self.dataplane.infer(r)
        )
        self.dataplane = DataPlane(self.registry)

    def compute_ns(self) -> dict[str, tuple[int, int]]:
        found = {}
        for name in STEPS:
            compute = self.dataplane.statistics(name)[0].counts.inference_stats.compute_infer
            found[name] = (compute.count, compute.ns)
        return found


def measure(
    repository: Path, video: Path, rounds: int, seconds: float, log: Callable[[str], None]
) -> tuple[dict, list[tuple]]:
    quiet = logging.getLogger("edgebox")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # state changes at load and unload would interleave the table
    stack = _Stack(repository)
    stack.manager.load_models()
    try:
        frame = cv2.VideoCapture(str(video)).read()[1]
        pipeline_request = InferRequest(PIPELINE, [Tensor("image", "UINT8", frame)])
        preprocessed = stack.dataplane.infer(
            InferRequest("lane_preprocess", [Tensor("image", "UINT8", frame)])
        ).output("input")
        detector_request = InferRequest(DETECTOR, [Tensor("input", "FP32", preprocessed.data)])
        lanes = stack.dataplane.infer(pipeline_request).output("lane_point_counts").data
        log(f"  one frame through {PIPELINE}: {len(lanes)} lane(s) found")

        measures: dict[str, Callable[[float, Cell], None]] = {
            "detector alone": lambda s, c: _calls(stack, detector_request, s, c),
            "pipeline alone": lambda s, c: _calls(stack, pipeline_request, s, c),
            "stream (file)": lambda s, c: _stream(stack, str(video), s, c),
            "stream (1 in flight)": lambda s, c: _stream(stack, str(video), s, c, in_flight=1),
            "stream (synthetic)": lambda s, c: _stream(
                stack, f"synthetic:road?seed=7&width={WIDTH}&height={HEIGHT}", s, c
            ),
        }
        cells = {name: Cell() for name in MEASUREMENTS}
        for name in MEASUREMENTS:
            measures[name](min(seconds, 1.0), Cell())
        for index in range(rounds):
            order = (
                MEASUREMENTS[index % len(MEASUREMENTS) :]
                + MEASUREMENTS[: index % len(MEASUREMENTS)]
            )
            for name in order:
                measures[name](seconds, cells[name])
            log(
                f"  round {index + 1}/{rounds} per s: "
                + ", ".join(f"{name} {cells[name].rates[-1]:.1f}" for name in MEASUREMENTS)
            )
    finally:
        stack.manager.unload_all(30)
        quiet.setLevel(level)
    return _report(cells, log)


def _calls(stack: _Stack, request: InferRequest, seconds: float, cell: Cell) -> None:
    cpu_before = process_cpu_s(os.getpid())
    result = timed_calls(lambda: stack.dataplane.infer(request), seconds, MAX_CALLS)
    cpu_after = process_cpu_s(os.getpid())
    cell.rates.append(result.rate_per_s)
    if cpu_before is not None and cpu_after is not None:
        cell.cpu_ms.append((cpu_after - cpu_before) / result.calls * 1e3)


def _stream(stack: _Stack, source: str, seconds: float, cell: Cell, in_flight: int = 2) -> None:
    """One stream run: start, skip the warm-up results, count results for
    ``seconds``, stop."""
    results = stack.bus.subscribe(StreamResult, max_events=100_000)
    config = StreamSettings(
        name="bench",
        source=source,
        model=PIPELINE,
        fps=0,
        in_flight=in_flight,
        log_interval_s=3600,
    )
    manager = StreamManager([config], stack.dataplane, stack.bus)
    manager.start()
    try:
        for _ in range(WARMUP_RESULTS):
            if results.get(timeout=60) is None:
                raise RuntimeError(f"stream bench: no result from '{source}' within 60 s")
        started = time.monotonic()
        cpu_before = process_cpu_s(os.getpid())
        steps_before = stack.compute_ns()
        seen: list[StreamResult] = []
        last = started
        while time.monotonic() - started < seconds:
            result = results.get(timeout=60)
            if result is None:
                raise RuntimeError(f"stream bench: results from '{source}' stopped")
            seen.append(result)
            last = time.monotonic()
        cpu_after = process_cpu_s(os.getpid())
        steps_after = stack.compute_ns()
    finally:
        manager.stop(30)
        results.close()
    cell.rates.append(len(seen) / (last - started))
    if cpu_before is not None and cpu_after is not None:
        cell.cpu_ms.append((cpu_after - cpu_before) / len(seen) * 1e3)
    for part in ("capture_ms", "queue_ms", "inference_ms", "total_ms"):
        values = [getattr(r.latency, part) for r in seen]
        cell.latency_ms.setdefault(part, []).append(statistics.fmean(values))
    for name in STEPS:
        count = steps_after[name][0] - steps_before[name][0]
        ns = steps_after[name][1] - steps_before[name][1]
        cell.step_ms.setdefault(name, []).append(ns / max(count, 1) / 1e6)
    cell.lanes.append(statistics.fmean(len(r.outputs.get("lanes", [])) for r in seen))
    cell.dropped += manager.status()[0].frames_dropped


def _report(cells: dict[str, Cell], log: Callable[[str], None]) -> tuple[dict, list[tuple]]:
    detector = cells["detector alone"]
    log(
        f"\n{'measurement':<20}{'per s':>8}{'/detector':>11}{'range':>13}{'CPU ms':>8}"
        f"{'per CPU':>9}   stream: mean ms capture/queue/inference/total; "
        "step compute ms pre/detector/post"
    )
    figures: dict = {}
    for name, cell in cells.items():
        ratios = [r / d for r, d in zip(cell.rates, detector.rates, strict=True)]
        entry = {
            "per_s": round(statistics.median(cell.rates), 2),
            "over_detector": round(statistics.median(ratios), 3),
            "over_detector_range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
        cpu = statistics.median(cell.cpu_ms) if cell.cpu_ms else float("nan")
        entry["cpu_ms_per_frame"] = round(cpu, 2)
        per_cpu = float("nan")
        if cell.cpu_ms and len(detector.cpu_ms) == len(cell.cpu_ms):
            per_cpu = statistics.median(
                d / c for d, c in zip(detector.cpu_ms, cell.cpu_ms, strict=True)
            )
            entry["frames_per_cpu_s_over_detector"] = round(per_cpu, 3)
        detail = ""
        if cell.latency_ms:
            latency = {k: round(statistics.median(v), 2) for k, v in cell.latency_ms.items()}
            steps = {k: round(statistics.median(v), 2) for k, v in cell.step_ms.items()}
            entry.update(
                latency_ms=latency,
                step_compute_ms=steps,
                lanes_per_frame=round(statistics.median(cell.lanes), 2),
                frames_dropped=cell.dropped,
            )
            detail = (
                "/".join(f"{v:.1f}" for v in latency.values())
                + "; "
                + "/".join(f"{v:.1f}" for v in steps.values())
                + f"; {entry['lanes_per_frame']:.1f} lanes, {cell.dropped} dropped"
            )
        figures[name] = entry
        log(
            f"{name:<20}{entry['per_s']:>8.1f}{entry['over_detector']:>11.2f}"
            f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>13}{cpu:>8.1f}{per_cpu:>9.2f}   {detail}"
        )
    stream = figures["stream (file)"]
    ratio = stream["over_detector"]
    target = (
        f"stream fps >= {TARGET_RATIO} x {DETECTOR} alone",
        ratio >= TARGET_RATIO,
        f"{stream['per_s']:.1f} fps vs {figures['detector alone']['per_s']:.1f} calls/s "
        f"(median per-round ratio {ratio:.2f}, needs >= {TARGET_RATIO})",
        round(ratio / TARGET_RATIO, 3),
    )
    return figures, [target]
