"""Issue 21: what a shadow rollout costs the stream it watches. The demo's
``lane_pipeline`` over HTTP at a camera's pace (one 640x360 frame at a time,
one client), on two daemons of their own (``bench/out/shadow/``), in rounds
that alternate between them:

* **none**: ``lane_detector`` has ``rollout: shadow`` in its config but only
  version 1, so no rollout runs and the dataplane calls no observer.
* **shadow**: the same, then a version 2 (a copy of version 1's
  ``model.onnx``) copied in as an operator does (a hidden folder renamed into
  place); with ``rollout_samples`` at its maximum the rollout stays in
  progress, and every detector step of every frame is offered to version 2.

The pace is a camera's 15 frames a second, slowed where the pipeline alone
would keep the device busy more than a third of the time: then one frame per
``HEADROOM`` times the pipeline's own latency, measured before the rounds. A
shadow asks for about as much device time again as the detector (a second
run per frame), so a device that runs the pipeline near its limit has no
room for one whatever the rollout does; bench/RESULTS.md (issue 21) measures
what it costs there. On the 2-core VM of bench/RESULTS.md the detector is
ONNX on the CPU, 140-360 ms a frame, and the pace 1.2-1.9 frames a second.

Both daemons start with a fresh state directory, so version 1 is on trial on
both (its requests touch the crash marks alike). The shadow daemon's rollout
resource is read around each of its rounds: its samples must grow with the
frames sent, or the round did not measure a shadow. Target: p99 with the
shadow <= 1.10 x without, on the requests of all rounds of each daemon pooled
(a few dozen or hundred per round leave a per-round p99 resting on one or two
requests, so the per-round ratios are reported as the spread, not judged).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from bench.cpu_time import process_cpu_s
from bench.latency import Round, Summary, merge
from daemon_process import DaemonProcess, wait_for
from edgebox.streams.synthetic_road import SyntheticRoad

PIPELINE = "lane_pipeline"
DETECTOR = "lane_detector"
STEPS = ("lane_preprocess", DETECTOR, "lane_postprocess")
WIDTH, HEIGHT = 640, 360
FPS = 15.0
"""A camera's pace, where the device has room for it (``HEADROOM``)."""
HEADROOM = 3.0
"""The frame interval is at least this many times the pipeline's latency
alone: the frame's own run, the shadow's detector run after it (as long
again, longer when other processes share the cores), and room."""
CALIBRATION_REQUESTS = 5
MIN_FRAMES = 5
FRAMES = 8
"""Distinct road frames, sent in turn."""
WARMUP_REQUESTS = 10
TARGET = 1.10
SHADOW_PARAMETERS = """
parameters { key: "rollout" value { string_value: "shadow" } }
parameters { key: "rollout_samples" value { string_value: "100000" } }
"""
"""The most samples a policy allows: at 15 frames a second, about two hours."""
CONDITIONS = ("none", "shadow")

ROOT = Path(__file__).resolve().parents[1]
DEMO_REPOSITORY = ROOT / "model_repository"


@dataclass
class Condition:
    """One daemon's rounds."""

    daemon: DaemonProcess
    rounds: list[Round] = field(default_factory=list)
    daemon_cpu_ms: list[float] = field(default_factory=list)
    """Per round, the daemon's CPU time per frame."""
    samples: list[int] = field(default_factory=list)
    """Per round (shadow only), samples the rollout gained, and dropped."""
    dropped: list[int] = field(default_factory=list)
    step_ms: dict[str, list[float]] = field(default_factory=dict)
    """Per round, each step's mean time in its scheduler per frame."""


def prepare(folder: Path) -> dict[str, Path]:
    """A repository per condition under ``folder``, fresh, with no state
    directory left from an earlier run (it would trust version 1)."""
    if folder.exists():
        shutil.rmtree(folder)
    repositories = {}
    for condition in CONDITIONS:
        repository = folder / condition / "repository"
        repository.mkdir(parents=True)
        for name in (PIPELINE, *STEPS):
            source = DEMO_REPOSITORY / name
            if not (source / "config.pbtxt").is_file():
                raise SystemExit(f"shadow bench: '{source}' is missing (the demo's lane_pipeline)")
            shutil.copytree(source, repository / name, ignore=shutil.ignore_patterns("__pycache__"))
        detector = repository / DETECTOR
        if not (detector / "1" / "model.onnx").exists():
            from scripts.lane_detector import build_lane_detector

            build_lane_detector(detector / "1" / "model.onnx")
        config = detector / "config.pbtxt"
        config.write_text(config.read_text() + SHADOW_PARAMETERS)
        repositories[condition] = repository
    return repositories


def measure(
    folder: Path, rounds: int, round_s: float, log: Callable[[str], None] = print
) -> tuple[dict, list]:
    """``rounds`` rounds of ``round_s`` seconds of frames per daemon (at least
    ``MIN_FRAMES``), the order of the two daemons swapped every round."""
    repositories = prepare(folder)
    conditions = {
        name: Condition(DaemonProcess(repositories[name], folder / name / "daemon.log", []))
        for name in CONDITIONS
    }
    road = SyntheticRoad(seed=7, width=WIDTH, height=HEIGHT)
    frames = [road.next_frame().image for _ in range(FRAMES)]
    load_before = os.getloadavg()[0]
    try:
        for condition in conditions.values():
            condition.daemon.start(wait_ready=False)
        for condition in conditions.values():
            wait_for(condition.daemon.is_ready, 60, what=f"{condition.daemon.log_path} ready")
        shadow = conditions["shadow"].daemon
        _publish_copy(repositories["shadow"] / DETECTOR, 2)
        wait_for(
            lambda: _rollout(shadow.url)["stage"] == "shadow",
            60,
            0.2,
            f"version 2 of {DETECTOR} to be in shadow rollout ({shadow.log_path})",
        )
        if (stage := _rollout(conditions["none"].daemon.url)["stage"]) != "none":
            raise RuntimeError(f"shadow bench: the daemon without a rollout shows {stage!r}")
        lanes = _warm_up(conditions["none"].daemon.url, frames)
        alone_ms = _pipeline_ms(conditions["none"].daemon.url, frames)
        period_s = max(1 / FPS, HEADROOM * alone_ms / 1e3)
        log(
            f"  {PIPELINE} alone: {alone_ms:.1f} ms a frame; pace {1 / period_s:.2f} frames/s"
            + ("" if period_s * FPS <= 1.0001 else f" ({HEADROOM:g} x that, not {FPS:g})")
        )
        shadow_lanes = _warm_up(shadow.url, frames)
        log(f"  lanes in frame 0: {lanes} without, {shadow_lanes} with the shadow")
        # The warm-up's frames came back to back: let the copies they left
        # queued for version 2 (at most three) run before the first round.
        time.sleep(max(1.0, period_s))
        requests = max(MIN_FRAMES, round(round_s / period_s))
        for index in range(rounds):
            order = CONDITIONS if index % 2 == 0 else CONDITIONS[::-1]
            for name in order:
                _take(name, conditions[name], frames, requests, period_s)
            log(
                f"  round {index + 1}/{rounds} p50/p99 ms: "
                + ", ".join(
                    f"{name} {c.rounds[-1].p50_us / 1e3:.1f}/{c.rounds[-1].p99_us / 1e3:.1f}"
                    for name, c in conditions.items()
                )
                + f"; shadow samples +{conditions['shadow'].samples[-1]}, "
                f"dropped +{conditions['shadow'].dropped[-1]}"
            )
        final = _rollout(shadow.url)
    finally:
        for name, condition in conditions.items():
            code = condition.daemon.stop()
            if code != 0:
                log(f"shadow bench: the '{name}' daemon exited with {code}")
    return _report(conditions, final, period_s, alone_ms, (load_before, os.getloadavg()[0]), log)


def _publish_copy(model_dir: Path, version: int) -> None:
    """Version 1's files as ``version``, built hidden and renamed into place."""
    hidden = model_dir / f".v{version}"
    shutil.copytree(model_dir / "1", hidden)
    os.rename(hidden, model_dir / str(version))


def _rollout(url: str) -> dict:
    address = f"http://{url}/v2/repository/models/{DETECTOR}/rollout"
    with urllib.request.urlopen(address, timeout=10) as reply:
        return json.loads(reply.read())


def _inputs(frame: np.ndarray) -> list[httpclient.InferInput]:
    image = httpclient.InferInput("image", list(frame.shape), "UINT8")
    image.set_data_from_numpy(frame)
    return [image]


def _warm_up(url: str, frames: list[np.ndarray]) -> int:
    """A few untimed frames; the lanes found in the first."""
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=60)
    try:
        counts = client.infer(PIPELINE, _inputs(frames[0])).as_numpy("lane_point_counts")
        for index in range(WARMUP_REQUESTS):
            client.infer(PIPELINE, _inputs(frames[index % len(frames)]))
        return len(counts)
    finally:
        client.close()


def _pipeline_ms(url: str, frames: list[np.ndarray]) -> float:
    """Median latency of a few frames sent back to back."""
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=60)
    try:
        latencies = []
        for index in range(CALIBRATION_REQUESTS):
            inputs = _inputs(frames[index % len(frames)])
            before = time.perf_counter()
            client.infer(PIPELINE, inputs)
            latencies.append((time.perf_counter() - before) * 1e3)
        return statistics.median(latencies)
    finally:
        client.close()


def _step_ns(url: str) -> dict[str, tuple[int, int]]:
    """(requests, ns in the scheduler) so far, per step (version 1; the
    candidate in shadow is not served, so it has no statistics)."""
    client = httpclient.InferenceServerClient(url)
    try:
        found = {}
        for model in STEPS:
            stats = client.get_inference_statistics(model, "1")["model_stats"][0]
            success = stats["inference_stats"]["success"]
            found[model] = (success["count"], success["ns"])
        return found
    finally:
        client.close()


def _take(
    name: str, condition: Condition, frames: list[np.ndarray], requests: int, period_s: float
) -> None:
    url, pid = condition.daemon.url, condition.daemon.process.pid
    shadowed = name == "shadow"
    before = _rollout(url) if shadowed else None
    steps_before = _step_ns(url)
    cpu_before = process_cpu_s(pid)
    condition.rounds.append(paced(url, frames, requests, period_s))
    cpu_after = process_cpu_s(pid)
    if cpu_before is not None and cpu_after is not None:
        condition.daemon_cpu_ms.append((cpu_after - cpu_before) / requests * 1e3)
    if shadowed:
        # The last frame's copy may still be running on version 2.
        time.sleep(max(0.2, period_s))
    for label, (count, ns) in _step_ns(url).items():
        count -= steps_before[label][0]
        ns -= steps_before[label][1]
        condition.step_ms.setdefault(label, []).append(ns / max(count, 1) / 1e6)
    if before is not None:
        after = _rollout(url)
        if after["stage"] != "shadow":
            raise RuntimeError(f"shadow bench: the rollout left the shadow stage: {after}")
        condition.samples.append(after["samples"] - before["samples"])
        condition.dropped.append(after["dropped"] - before["dropped"])


def paced(url: str, frames: list[np.ndarray], requests: int, period_s: float) -> Round:
    """``requests`` frames, one every ``period_s`` as a camera sends them (a
    frame answered late is followed at once, with no catching up), each
    request timed from send to decoded answer; the elapsed time counts from
    one period before the first."""
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=60)
    clock = time.perf_counter_ns
    period_ns = int(period_s * 1e9)
    latencies = np.empty(requests, dtype=np.int64)
    try:
        # The connection's first frame, untimed; the timed ones follow at the
        # pace, as a camera's would (at once, the first would meet the shadow
        # copy of this one).
        client.infer(PIPELINE, _inputs(frames[0]))
        start = clock()
        due = start + period_ns
        for index in range(requests):
            wait_ns = due - clock()
            if wait_ns > 0:
                time.sleep(wait_ns / 1e9)
            inputs = _inputs(frames[index % len(frames)])
            before = clock()
            client.infer(PIPELINE, inputs)
            latencies[index] = clock() - before
            due = max(due + period_ns, clock())
        return Round(latencies, (clock() - start) / 1e9)
    finally:
        client.close()


def _p95_ms(pooled: Round) -> float:
    return float(np.percentile(pooled.latencies_ns, 95)) / 1e6


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def _report(
    conditions: dict[str, Condition],
    final: dict,
    period_s: float,
    alone_ms: float,
    load: tuple[float, float],
    log: Callable[[str], None],
) -> tuple[dict, list]:
    """The table, the figures for results.json, and the target, judged on
    the pooled p99 of each side (their rounds interleaved)."""
    pooled = {
        name: merge(c.rounds, sum(r.elapsed_s for r in c.rounds)) for name, c in conditions.items()
    }
    none, shadow = conditions["none"], conditions["shadow"]
    p99_ratio = pooled["shadow"].p99_us / pooled["none"].p99_us
    p50_ratio = pooled["shadow"].p50_us / pooled["none"].p50_us
    round_p99 = [s.p99_us / n.p99_us for s, n in zip(shadow.rounds, none.rounds, strict=True)]
    round_p50 = [s.p50_us / n.p50_us for s, n in zip(shadow.rounds, none.rounds, strict=True)]
    log(
        f"\n{'rollout':<9}{'frames':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'p99 range':>14}{'daemon CPU ms/frame':>21}   step ms: pre/detector/post"
    )
    figures: dict = {}
    for name, condition in conditions.items():
        all_of = pooled[name]
        p99s = [r.p99_us / 1e3 for r in condition.rounds]
        cpu = statistics.median(condition.daemon_cpu_ms) if condition.daemon_cpu_ms else None
        figures[name] = {
            **Summary.of(condition.rounds).as_dict(),
            "pooled_p50_ms": round(all_of.p50_us / 1e3, 2),
            "pooled_p95_ms": round(_p95_ms(all_of), 2),
            "pooled_p99_ms": round(all_of.p99_us / 1e3, 2),
            "max_ms": round(float(all_of.latencies_ns.max()) / 1e6, 2),
            "round_p99_ms": [round(p, 2) for p in p99s],
            "daemon_cpu_ms_per_frame": None if cpu is None else round(cpu, 2),
            "step_ms": {k: round(statistics.median(v), 2) for k, v in condition.step_ms.items()},
        }
        log(
            f"{name:<9}{all_of.calls:>8}{all_of.p50_us / 1e3:>9.2f}{_p95_ms(all_of):>9.2f}"
            f"{all_of.p99_us / 1e3:>9.2f}"
            f"{figures[name]['max_ms']:>9.2f}{f'{min(p99s):.1f}-{max(p99s):.1f}':>14}"
            f"{'' if cpu is None else f'{cpu:.2f}':>21}   "
            + "/".join(f"{v:.1f}" for v in figures[name]["step_ms"].values())
        )
    p95_ratio = _p95_ms(pooled["shadow"]) / _p95_ms(pooled["none"])
    samples, dropped, sent = sum(shadow.samples), sum(shadow.dropped), pooled["shadow"].calls
    figures.update(
        frames_per_s=round(1 / period_s, 3),
        pipeline_alone_ms=round(alone_ms, 2),
        p50_ratio=round(p50_ratio, 3),
        p95_ratio=round(p95_ratio, 3),
        p99_ratio=round(p99_ratio, 3),
        round_p50_ratios=[round(r, 3) for r in round_p50],
        round_p99_ratios=[round(r, 3) for r in round_p99],
        shadow_samples=samples,
        shadow_dropped=dropped,
        shadow_frames=sent,
        load_average=[round(v, 2) for v in load],
        rollout=final,
    )
    log(
        f"shadow/none: p50 {p50_ratio:.3f} (rounds {min(round_p50):.2f}-{max(round_p50):.2f}), "
        f"p95 {p95_ratio:.3f}, p99 {p99_ratio:.3f} (rounds {min(round_p99):.2f}-"
        f"{max(round_p99):.2f}); load average {load[0]:.2f} before, {load[1]:.2f} after; "
        f"during the shadow rounds the rollout compared {samples} and dropped {dropped} "
        f"of {sent} frames (since the rollout began: version 2's p95 "
        f"{_ms(final.get('candidate_p95_ms'))}, version 1's {_ms(final.get('serving_p95_ms'))}, "
        f"agreement {final.get('agreement')})"
    )
    shadowed = samples + dropped >= sent and samples > 0
    target = (
        f"{PIPELINE} at a stream's pace: p99 with a shadow rollout <= {TARGET} x without",
        p99_ratio <= TARGET and shadowed,
        f"{pooled['shadow'].p99_us / 1e3:.2f} ms vs {pooled['none'].p99_us / 1e3:.2f} ms, "
        f"ratio {p99_ratio:.3f} (per round {min(round_p99):.2f}-{max(round_p99):.2f}) "
        f"at {1 / period_s:.2f} frames/s; "
        f"shadow samples {samples}, dropped {dropped}, of {sent} frames",
        round(p99_ratio / TARGET, 3),
    )
    return figures, [target]
