"""Issue 26: cameras as the Orin sees them, measured with the RTSP test
camera (``tests/rtsp_camera.py``), the real daemon and a real broker.

* **glass to result**: one camera stamps the wall clock into each frame's top
  rows (``scripts/rtsp_test_camera.py --stamp``, 640x360 at 15 fps, H.264 over
  RTSP/TCP). The daemon's stream sends each frame to ``glass_stamp``, a python
  model that reads the stamp back, and publishes the result over MQTT; a
  subscriber on this machine (same clock) takes its receipt time minus the
  stamp: encoder, RTSP, FFmpeg's decode, the stream's queue, the model, the
  MQTT bridge and the broker, the whole way. The daemon's own share
  (``result_ms``, read to published) and the broker's (receipt minus
  ``published_at``) are shown beside it, so what is left is the camera's,
  the network's and the decoder's.
* **four cameras, one model**: four cameras into ``lane_pipeline``, one at
  30 fps and three at 10 fps, no fps cap on any stream, so the fast camera
  offers three times the frames. Per camera: frames captured, results per
  second, frames dropped from its queue, and its read-to-result p50/p99 (the
  stream's status). The detector's batches (``nv_inference_count`` over
  ``nv_inference_exec_count`` in /metrics) show frames from different
  cameras sharing a batch. **fairness** is the slowest 10 fps camera's
  results per second over the fastest's: the fast camera must not crowd the
  others out.
* **one camera**, the baseline: the 30 fps camera alone into
  ``lane_pipeline``, for what batching four buys in results per second.

Opt-in (``make bench-cameras``, about 5 minutes); figures go to
bench/RESULTS.md by hand, with the machine they came from.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "cameras"
WARMUP_S = 15.0
GLASS_STAMP_MODEL = '''"""Reads the wall-clock stamp the RTSP test camera (--stamp) writes into
each frame's top rows: 42 blocks of 15 pixels on row 8, white is 1, most
significant bit first."""

import numpy as np
import triton_python_backend_utils as pb_utils

BITS, BLOCK = 42, 15


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            frame = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            row = frame[8, BLOCK // 2 : BITS * BLOCK : BLOCK].astype(np.int32).mean(axis=1)
            stamp = 0
            for bit in row > 128:
                stamp = stamp * 2 + int(bit)
            out = pb_utils.Tensor("captured_ms", np.array([stamp], np.int64))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''
GLASS_STAMP_CONFIG = """name: "glass_stamp"
backend: "python"
max_batch_size: 0
input [ { name: "image" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] } ]
output [ { name: "captured_ms" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def _repository() -> Path:
    repository = OUT / "repository"
    shutil.rmtree(repository, ignore_errors=True)
    for name in ("lane_pipeline", "lane_preprocess", "lane_detector", "lane_postprocess"):
        shutil.copytree(ROOT / "model_repository" / name, repository / name)
    stamp = repository / "glass_stamp"
    (stamp / "1").mkdir(parents=True)
    (stamp / "config.pbtxt").write_text(GLASS_STAMP_CONFIG)
    (stamp / "1" / "model.py").write_text(GLASS_STAMP_MODEL)
    return repository


def _streams(daemon) -> dict:
    with urllib.request.urlopen(f"{daemon.dashboard_url}/api/v1/streams", timeout=10) as answer:
        return {s["name"]: s for s in json.loads(answer.read())["streams"]}


def _metric(daemon, family: str, model: str) -> float:
    with urllib.request.urlopen(f"http://{daemon.metrics_url}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(family + "{") and f'model="{model}"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _daemon(folder: Path, broker, streams_yaml: str):
    from daemon_process import DaemonProcess
    from scripts.run_demo import mqtt_flags

    config = folder / "edgebox.yaml"
    config.write_text(f"dashboard: {{anonymous_read: true}}\nstreams:\n{streams_yaml}")
    return DaemonProcess(
        _repository(),
        folder / "daemon.log",
        ["--config", str(config), *mqtt_flags(broker.url, folder / "run")],
        cwd=ROOT,
    )


def _percentile(values: list[float], percent: float) -> float:
    """Nearest rank, as the stream's own distribution (latency_window.py)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)] if ordered else math.nan


def glass_to_result(seconds: float, log=print) -> dict:
    import paho.mqtt.client as mqtt
    from rtsp_camera import RtspTestCamera

    from scripts.demo_broker import LocalMosquitto

    folder = OUT / "glass"
    folder.mkdir(parents=True, exist_ok=True)
    broker = LocalMosquitto(folder / "mosquitto").start()
    camera = RtspTestCamera(folder / "camera", stamp=True, fps=15).start()
    daemon = _daemon(
        folder, broker, f"  - {{name: glass, source: '{camera.url()}', model: glass_stamp}}\n"
    )
    glass, broker_ms, measuring = [], [], threading.Event()

    def on_message(_client, _userdata, message) -> None:
        received = time.time()
        if not measuring.is_set():
            return
        result = json.loads(message.payload)
        glass.append(received * 1e3 - result["outputs"]["captured_ms"][0])
        broker_ms.append((received - result["published_at"]) * 1e3)

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    client.on_message = on_message
    try:
        daemon.start(listen_timeout_s=60)
        client.connect("127.0.0.1", broker.port)
        client.subscribe("edgebox/+/streams/glass/results", qos=1)
        client.loop_start()
        time.sleep(WARMUP_S)  # a bench's pacing, not a test's synchronization
        measuring.set()
        time.sleep(seconds)
        measuring.clear()
        status = _streams(daemon)["glass"]
    finally:
        client.loop_stop()
        daemon.stop()
        camera.stop()
        broker.stop()
    result = status["result_latency"] or {}
    figures = {
        "results": len(glass),
        "glass_p50_ms": _percentile(glass, 50),
        "glass_p90_ms": _percentile(glass, 90),
        "glass_p99_ms": _percentile(glass, 99),
        "glass_max_ms": max(glass, default=float("nan")),
        "daemon_result_p50_ms": result.get("p50_ms"),
        "daemon_result_p99_ms": result.get("p99_ms"),
        "broker_p50_ms": _percentile(broker_ms, 50),
    }
    log(json.dumps(figures))
    return figures


FOUR = (("fast", 30), ("slow-1", 10), ("slow-2", 10), ("slow-3", 10))


def four_cameras(seconds: float, log=print, cameras_run=FOUR, label: str = "four") -> dict:
    from rtsp_camera import RtspTestCamera

    from scripts.demo_broker import LocalMosquitto

    folder = OUT / label
    folder.mkdir(parents=True, exist_ok=True)
    broker = LocalMosquitto(folder / "mosquitto").start()
    cameras = [RtspTestCamera(folder / name, fps=fps).start() for name, fps in cameras_run]
    streams = "".join(
        f"  - {{name: {name}, source: '{camera.url()}', model: lane_pipeline, fps: 0}}\n"
        for (name, _), camera in zip(cameras_run, cameras, strict=True)
    )
    daemon = _daemon(folder, broker, streams)
    try:
        daemon.start(listen_timeout_s=60)
        time.sleep(WARMUP_S)  # a bench's pacing, not a test's synchronization
        before = _streams(daemon)
        counts = (
            _metric(daemon, "nv_inference_count", "lane_detector"),
            _metric(daemon, "nv_inference_exec_count", "lane_detector"),
        )
        started = time.monotonic()
        time.sleep(seconds)
        after = _streams(daemon)
        elapsed = time.monotonic() - started
        counts_after = (
            _metric(daemon, "nv_inference_count", "lane_detector"),
            _metric(daemon, "nv_inference_exec_count", "lane_detector"),
        )
    finally:
        daemon.stop()
        for camera in cameras:
            camera.stop()
        broker.stop()
    rows = {}
    for name, fps in cameras_run:
        first, last = before[name], after[name]
        latency = last["result_latency"] or {}
        rows[name] = {
            "camera_fps": fps,
            "captured_per_s": (last["frames_captured"] - first["frames_captured"]) / elapsed,
            "results_per_s": (last["frames_inferred"] - first["frames_inferred"]) / elapsed,
            "dropped_per_s": (last["frames_dropped"] - first["frames_dropped"]) / elapsed,
            "result_p50_ms": latency.get("p50_ms"),
            "result_p99_ms": latency.get("p99_ms"),
        }
    inferences = counts_after[0] - counts[0]
    executions = counts_after[1] - counts[1]
    figures = {
        "cameras": rows,
        "results_per_s": sum(row["results_per_s"] for row in rows.values()),
        "detector_mean_batch": inferences / executions if executions else float("nan"),
        "seconds": elapsed,
    }
    slow = [rows[name]["results_per_s"] for name, _ in cameras_run[1:]]
    if slow:
        figures["fairness_slowest_slow_over_fast"] = min(slow) / max(
            rows["fast"]["results_per_s"], 1e-9
        )
        figures["slow_spread"] = (max(slow) - min(slow)) / max(statistics.mean(slow), 1e-9)
    log(json.dumps(figures, indent=1))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--only", choices=("glass", "one", "four"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    report = {}
    if args.only in (None, "glass"):
        report["glass"] = glass_to_result(args.seconds)
    if args.only in (None, "one"):
        report["one"] = four_cameras(args.seconds, cameras_run=FOUR[:1], label="one")
    if args.only in (None, "four"):
        report["four"] = four_cameras(args.seconds)
    (OUT / "report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
