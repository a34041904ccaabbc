"""The README's pictures, and every page at a desktop's and a phone's size:
the demo repository with its synthetic road stream, telemetry read from a copy
of the AGX Orin fixture tree (tests/telemetry/fixtures/agx_orin) whose CPU
counters, temperatures, GPU load and rail currents this script moves once a
second, and add_sub under a light HTTP load. About two minutes.

    python scripts/dashboard_pictures.py OUT_DIR [--warm-s 120]

docs/dashboard.png is OUT_DIR/overview-desktop.png, docs/dashboard-phone.png
OUT_DIR/board-phone.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from dashboard.browser import PHONE, WINDOW, headless_chromium, set_viewport  # noqa: E402

from daemon_process import DaemonProcess, explicit_control  # noqa: E402
from model_fixtures import copy_demo_repository  # noqa: E402

FIXTURE = ROOT / "tests" / "telemetry" / "fixtures" / "agx_orin"
STREAM = "[{name: road, source: 'synthetic:road', model: lane_pipeline, fps: 10}]"
PAGES = {
    "overview": "/",
    "board": "/board",
    "models": "/models",
    "history": "/history?model=add_sub&range=15m",
    "streams": "/streams",
    "events": "/events",
}
OFFLINE_MILLI_C = -256000


def _replace(path: Path, text: str) -> None:
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    os.replace(staged, path)


def move_readings(tree: Path, stop: threading.Event) -> None:
    zones = {z: int(z.read_text()) for z in (tree / "sys/class/thermal").glob("*/temp")}
    tick = 0
    while not stop.wait(1.0):
        tick += 1
        lines = []
        for line in (tree / "proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if re.fullmatch(r"cpu\d*", name):
                numbers = [int(f) for f in fields]
                cores = 12 if name == "cpu" else 1
                phase = 0 if name == "cpu" else int(name[3:])
                busy = int(cores * (35 + 25 * math.sin(tick / 9 + phase) + random.uniform(0, 10)))
                numbers[0] += busy
                numbers[3] += 100 * cores - busy
                line = " ".join([name, *map(str, numbers)])
            lines.append(line)
        _replace(tree / "proc/stat", "\n".join(lines) + "\n")
        for zone, base in zones.items():
            if base > OFFLINE_MILLI_C:
                wobble = 4000 * math.sin(tick / 15) + random.uniform(-300, 300)
                _replace(zone, f"{int(base + wobble)}\n")
        gpu = tree / "sys/class/devfreq/17000000.gpu/device/load"
        _replace(gpu, f"{int(550 + 250 * math.sin(tick / 7))}\n")
        for current in tree.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/curr*_input"):
            _replace(current, f"{int(900 + 400 * math.sin(tick / 11) + random.uniform(0, 80))}\n")


def load(url: str, stop: threading.Event) -> None:
    client = httpclient.InferenceServerClient(url)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [1, 16], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 16), np.float32))
        inputs.append(tensor)
    tick = 0
    while not stop.wait(0.004 + 0.003 * (1 + math.sin(tick / 2000))):
        tick += 1
        client.infer("add_sub", inputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--warm-s", type=float, default=120.0, help="seconds of load first")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="edgebox-pictures-") as scratch:
        work = Path(scratch)
        tree = work / "orin"
        shutil.copytree(FIXTURE, tree)
        config = work / "pictures.yaml"
        config.write_text(json.dumps({"dashboard": {"anonymous_read": True}}))
        daemon = DaemonProcess(
            copy_demo_repository(work / "models"),
            work / "daemon.log",
            [
                "--config",
                str(config),
                *explicit_control("*"),
                "--telemetry-source",
                "sysfs",
                "--telemetry-sysfs-root",
                str(tree),
                "--telemetry-interval-s",
                "1",
            ],
            env={"EDGEBOX_STREAMS": STREAM},
        )
        stop = threading.Event()
        threading.Thread(target=move_readings, args=(tree, stop), daemon=True).start()
        with daemon:
            threading.Thread(target=load, args=(daemon.url, stop), daemon=True).start()
            stop.wait(args.warm_s)
            with headless_chromium(work / "chromedriver.log") as browser:
                for name, path in PAGES.items():
                    for size, tag in ((WINDOW, "desktop"), (PHONE, "phone")):
                        set_viewport(browser, size)
                        browser.get(daemon.dashboard_url + path)
                        time.sleep(4)  # the pages' first polls and charts, for a picture only
                        browser.save_screenshot(str(args.out / f"{name}-{tag}.png"))
            stop.set()
    print(f"pictures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
