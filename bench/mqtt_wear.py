"""Issue 19's MQTT spool figures (``bench/out/mqtt/``):

- bytes the MQTT thread writes to disk per hour for one lane stream at 8 fps
  (plus a telemetry sample every 10 s), from ``/proc/self/io``, with the
  broker up and down, with the default ``spool_write_delay_s`` (1 s) and with
  0 (every message written, what the spool did before);
- what a ``kill -9`` with the broker down loses: the age, at the kill, of the
  newest result that reached the spool file, for a 15 fps stream.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from bench.mqtt import lane_result
from edgebox.events import EventBus, TelemetrySnapshot
from edgebox.mqtt.forwarder import MqttForwarder
from edgebox.mqtt.routing import Router
from edgebox.mqtt.settings import MqttSettings
from edgebox.mqtt.topics import Topics
from edgebox.telemetry.sample import TelemetrySample
from scripts.demo_broker import LocalMosquitto, free_loopback_port

REPO_ROOT = Path(__file__).resolve().parents[1]
STREAM_FPS = 8
TELEMETRY_EVERY_S = 10.0
SECONDS = 20.0
KILLS = 5
KILL_FPS = 15
BROKER_UP_TARGET = 0.01
"""Bytes written with the broker up, at most this fraction of the payload."""
BROKER_DOWN_TARGET = 3.0
"""Bytes written with the broker down, at most this many times the payload."""


def _written_bytes() -> int:
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["write_bytes"]) - int(fields["cancelled_write_bytes"])


def _telemetry() -> TelemetrySnapshot:
    sample = TelemetrySample(timestamp=time.time(), source="psutil", cpu_pct=12.5)
    return TelemetrySnapshot(**sample.as_dict())


def _case(url: str, spool: Path, write_delay_s: float) -> dict:
    settings = MqttSettings(
        url=url, device_id="bench", spool_path=spool, spool_write_delay_s=write_delay_s
    )
    bus = EventBus()
    router = Router(Topics("edgebox", "bench"), "bench", settings.qos)
    forwarder = MqttForwarder(
        settings,
        bus,
        router,
        {"device": "bench", "edgebox_version": "bench", "started_at": time.time()},
        lambda: {"models": {}, "streams": {}},
    )
    forwarder.start()
    deadline = time.monotonic() + 10
    while forwarder.stats().state == "starting" and time.monotonic() < deadline:
        time.sleep(0.05)
    payload = 0
    before = _written_bytes()
    started = time.monotonic()
    frames = 0
    next_telemetry = started
    while (now := time.monotonic()) - started < SECONDS:
        event = lane_result(frames)
        bus.publish(event)
        payload += len(router.route(event).topic) + len(json.dumps(event.as_dict()))
        frames += 1
        if now >= next_telemetry:
            bus.publish(_telemetry())
            next_telemetry += TELEMETRY_EVERY_S
        time.sleep(max(0.0, started + frames / STREAM_FPS - time.monotonic()))
    elapsed = time.monotonic() - started
    written = _written_bytes() - before
    forwarder.stop(10)
    per_hour = 3600 / elapsed
    return {
        "seconds": round(elapsed, 1),
        "payload_mb_per_hour": round(payload * per_hour / 1e6, 1),
        "written_mb_per_hour": round(written * per_hour / 1e6, 2),
        "written_to_payload": round(written / payload, 3),
        "spool_rows_left": forwarder.stats().spool_rows,
    }


def measure_writes(out: Path, log: Callable[[str], None] = print) -> tuple[dict, list]:
    out.mkdir(parents=True, exist_ok=True)
    figures: dict = {}
    with LocalMosquitto(out / "wear-broker") as broker:
        down = f"mqtt://127.0.0.1:{free_loopback_port()}"
        cases = {
            "broker up": (broker.url, 1.0),
            "broker down": (down, 1.0),
            "broker up, write delay 0": (broker.url, 0.0),
            "broker down, write delay 0": (down, 0.0),
        }
        for name, (url, delay) in cases.items():
            spool = out / f"wear-{name.replace(' ', '-').replace(',', '')}.sqlite"
            for leftover in spool.parent.glob(f"{spool.name}*"):
                leftover.unlink()
            figures[name] = found = _case(url, spool, delay)
            log(
                f"{name}: {found['written_mb_per_hour']} MB/hour written for "
                f"{found['payload_mb_per_hour']} MB/hour of payload "
                f"({found['written_to_payload']}x)"
            )
    up = figures["broker up"]["written_to_payload"]
    down = figures["broker down"]["written_to_payload"]
    targets = [
        (
            f"MQTT spool writes with the broker up <= {BROKER_UP_TARGET:g}x the payload",
            up <= BROKER_UP_TARGET,
            f"{up}x ({figures['broker up']['written_mb_per_hour']} MB/hour)",
            up / BROKER_UP_TARGET,
        ),
        (
            f"MQTT spool writes with the broker down <= {BROKER_DOWN_TARGET:g}x the payload",
            down <= BROKER_DOWN_TARGET,
            f"{down}x ({figures['broker down']['written_mb_per_hour']} MB/hour)",
            down / BROKER_DOWN_TARGET,
        ),
    ]
    return figures, targets


_CHILD = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{bench!r}, {tests!r}]
    from bench.mqtt import lane_result
    from edgebox.events import EventBus
    from edgebox.mqtt.forwarder import MqttForwarder
    from edgebox.mqtt.routing import Router
    from edgebox.mqtt.settings import MqttSettings
    from edgebox.mqtt.topics import Topics
    settings = MqttSettings(url={url!r}, device_id="bench", spool_path={spool!r},
                            spool_write_delay_s={delay!r})
    bus = EventBus()
    forwarder = MqttForwarder(settings, bus, Router(Topics("edgebox", "bench"), "bench", 1),
                              {{"device": "bench", "edgebox_version": "b", "started_at": 0.0}},
                              lambda: {{"models": {{}}, "streams": {{}}}})
    forwarder.start()
    print("started", flush=True)
    started = time.monotonic()
    frame = 0
    while True:
        bus.publish(lane_result(frame))
        frame += 1
        time.sleep(max(0.0, started + frame / {fps} - time.monotonic()))
""")


def _newest_on_file(spool: Path) -> float | None:
    conn = sqlite3.connect(f"file:{spool}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT payload FROM rows WHERE kind = 'result'").fetchall()
    finally:
        conn.close()
    return max((json.loads(payload)["timestamp"] for (payload,) in rows), default=None)


def measure_kill_window(out: Path, log: Callable[[str], None] = print) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    figures: dict = {}
    for delay in (1.0, 0.0):
        windows = []
        for attempt in range(KILLS):
            spool = out / f"kill-{delay:g}-{attempt}.sqlite"
            for leftover in spool.parent.glob(f"{spool.name}*"):
                leftover.unlink()
            code = _CHILD.format(
                bench=str(REPO_ROOT),
                tests=str(REPO_ROOT / "tests"),
                url=f"mqtt://127.0.0.1:{free_loopback_port()}",
                spool=str(spool),
                delay=delay,
                fps=KILL_FPS,
            )
            child = subprocess.Popen(
                [sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
            )
            assert child.stdout is not None
            child.stdout.readline()
            time.sleep(random.uniform(3.0, 5.0))
            killed_at = time.time()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            newest = _newest_on_file(spool)
            windows.append(1000 * (killed_at - newest) if newest else float("inf"))
        figures[f"write delay {delay:g} s"] = {
            "kills": KILLS,
            "stream_fps": KILL_FPS,
            "newest_result_age_ms_median": round(statistics.median(windows)),
            "newest_result_age_ms_max": round(max(windows)),
        }
        log(
            f"kill -9 with the broker down, write delay {delay:g} s: the newest result on disk "
            f"was {statistics.median(windows):.0f} ms old at the kill (median of {KILLS}; "
            f"max {max(windows):.0f} ms; a frame every {1000 / KILL_FPS:.0f} ms)"
        )
    return figures
