"""The Board and Streams pages in a real headless Chromium against the real
daemon: telemetry from the AGX Orin fixture sysfs tree (its CPU counters
advanced by the test, so per-core loads are known), the demo repository and
the synthetic road stream at 10 fps. Checks the values shown, the snapshot
download, a phone's width and dark mode, and a clean console."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import cv2
import numpy as np
import pytest
from dashboard.browser import (
    PHONE,
    WINDOW,
    console_errors,
    headless_chromium,
    prefer_colour_scheme,
    screenshot,
    set_viewport,
)
from selenium.webdriver.common.by import By

from daemon_process import wait_for
from edgebox.telemetry.sysfs_source import SysfsSource
from model_fixtures import copy_demo_repository

FIXTURE_TREE = Path(__file__).resolve().parents[1] / "telemetry" / "fixtures" / "agx_orin"
STREAM = "[{name: road, source: 'synthetic:road', model: lane_pipeline, fps: 10}]"
CORES = 12
UNKNOWN = "\u2013"
HEALTHS = {"healthy", "degraded", "reconnecting", "down"}


def fixed(value: float, places: str) -> str:
    """``value`` as JavaScript's ``toFixed`` writes it: the exact binary value
    rounded half up (Python's format rounds 45.25 to 45.2, JS to 45.3)."""
    return str(Decimal(value).quantize(Decimal(places), ROUND_HALF_UP))


def core_busy_pct(core: int) -> int:
    """The load the test gives core ``core``: 5 % for the first, 60 % for the 12th."""
    return 5 * (core + 1)


@pytest.fixture(scope="module")
def orin_tree(module_path) -> Path:
    return Path(shutil.copytree(FIXTURE_TREE, module_path / "agx_orin"))


@pytest.fixture(scope="module")
def repository(repository):
    return copy_demo_repository(repository)


@pytest.fixture(scope="module")
def daemon_args(module_path, orin_tree):
    config = module_path / "dashboard.yaml"
    settings = {"anonymous_read": True, "session_key_path": str(module_path / "session.key")}
    config.write_text(json.dumps({"dashboard": settings}))
    return [
        "--config",
        str(config),
        "--telemetry-source",
        "sysfs",
        "--telemetry-sysfs-root",
        str(orin_tree),
        "--telemetry-interval-s",
        "0.5",
    ]


@pytest.fixture(scope="module")
def daemon_env():
    return {"EDGEBOX_STREAMS": STREAM}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromedriver") / "chromedriver.log") as driver:
        yield driver


@pytest.fixture
def page(browser):
    """The browser at a desktop's size in light mode, set back so afterwards."""
    console_errors(browser)
    yield browser
    set_viewport(browser, WINDOW)
    prefer_colour_scheme(browser, "")


def advance_cpu_counters(root: Path) -> None:
    """Adds 100 jiffies per core to proc/stat (and their sum to the ``cpu``
    line), ``core_busy_pct`` of them busy, replacing the file whole so the
    daemon never reads half of it."""
    stat = root / "proc/stat"
    lines = []
    for line in stat.read_text().splitlines():
        name, *fields = line.split()
        if re.fullmatch(r"cpu\d*", name):
            numbers = [int(f) for f in fields]
            cores = [int(name[3:])] if name != "cpu" else range(CORES)
            busy = sum(core_busy_pct(core) for core in cores)
            numbers[0] += busy
            numbers[3] += 100 * len(cores) - busy
            line = " ".join([name, *map(str, numbers)])
        lines.append(line)
    staged = stat.with_name("stat.new")
    staged.write_text("\n".join(lines) + "\n")
    os.replace(staged, stat)


BOARD_CELLS = """
const rows = (table, key) => Object.fromEntries(
  [...document.querySelectorAll(`#${table} tbody tr[data-${key}]`)].map((row) => [
    row.dataset[key], [...row.querySelectorAll("td")].map((cell) => cell.textContent),
  ]));
const width = (element) => (element ? element.getBoundingClientRect().width : 0);
return {
  cores: [...document.querySelectorAll("#cores .core")].map((core) => [
    core.querySelector(".value").textContent,
    width(core.querySelector(".fill")) / width(core.querySelector(".bar")),
    core.querySelector(".clock").textContent,
  ]),
  rails: rows("rails", "rail"),
  engines: rows("engines", "engine"),
  zones: rows("temperatures", "zone"),
  total: document.getElementById("total-power").textContent,
  source: document.getElementById("board-source").textContent,
  facts: Object.fromEntries([...document.querySelectorAll("#board-facts dd[data-fact]")].map(
    (dd) => [dd.dataset.fact, dd.textContent])),
};
"""
"""Everything the Board page shows, read in one script so a refresh cannot
land between two cells."""


def board_cells(driver) -> dict:
    return driver.execute_script(BOARD_CELLS)


def test_board_shows_the_orin_trees_cores_rails_engines_and_zones(daemon, orin_tree, page):
    page.get(f"{daemon.dashboard_url}/board")
    wanted = [f"{core_busy_pct(core):.1f} %" for core in range(CORES)]

    def cores_shown() -> dict | None:
        advance_cpu_counters(orin_tree)
        cells = board_cells(page)
        return cells if [value for value, _, _ in cells["cores"]] == wanted else None

    shown = wait_for(cores_shown, 30, interval_s=0.2, what="each core's load on the Board page")
    screenshot(page, "board")
    filled = [fill for _, fill, _ in shown["cores"]]
    assert filled == pytest.approx([core_busy_pct(core) / 100 for core in range(CORES)], abs=0.02)
    reading = SysfsSource(FIXTURE_TREE).read()
    clocks = [f"{mhz:.0f} MHz" if mhz is not None else UNKNOWN for mhz in reading.cpu_freq_mhz]
    assert [clock for _, _, clock in shown["cores"]] == clocks
    assert clocks[-1] == UNKNOWN, "the fixture's last core has no cpufreq"
    assert shown["rails"] == {
        rail: [
            rail,
            f"{values.voltage_mv / 1000:.2f} V",
            f"{values.current_ma:.0f} mA",
            f"{values.power_mw / 1000:.2f} W",
        ]
        for rail, values in reading.power.items()
    }
    assert shown["total"] == f"{reading.total_power_mw / 1000:.2f} W"
    assert shown["engines"] == {"DLA0": ["DLA0", "off", UNKNOWN], "DLA1": ["DLA1", "on", UNKNOWN]}
    assert shown["zones"] == {
        zone: [zone, fixed(celsius, "0.1")] for zone, celsius in reading.temperatures_c.items()
    }
    facts = shown["facts"]
    mean_busy_pct = sum(core_busy_pct(core) for core in range(CORES)) / CORES
    assert facts["cpu"] == f"{mean_busy_pct:.1f} %"
    assert facts["nvpmodel"] == "MAXN (mode 0)"
    assert facts["fan"] == f"{reading.fan_pct:.0f} %"
    # Not readable without root: shown unknown, not 0.
    assert (facts["emc"], facts["jetson_clocks"]) == (UNKNOWN, UNKNOWN)
    assert shown["source"] == "from sysfs"
    assert console_errors(page) == []


STREAM_CELLS = """
const card = document.querySelector('[data-stream="road"]');
const text = (selector) => { const e = card && card.querySelector(selector); return e ? e.textContent : null; };
return card && {
  badge: text(".stream-health"), fps: text(".fps"), reconnects: text(".reconnects"),
  drops: text(".drops"), lastFrame: text(".last-frame"), summary: text(".health-history summary"),
  history: [...card.querySelectorAll(".health-history li .state")].map((e) => e.textContent),
};
"""
"""What the card of stream 'road' shows, read in one script."""


def test_streams_page_shows_health_fps_and_last_frame(daemon, page):
    page.get(f"{daemon.dashboard_url}/streams")
    shown = wait_for(
        lambda: (
            (cells := page.execute_script(STREAM_CELLS))
            and (cells["lastFrame"] or "").endswith(" ago")
            and cells
        ),
        30,
        what="the last frame's age of stream 'road'",
    )
    assert shown["badge"] in HEALTHS
    assert re.fullmatch(r"\d+\.\d fps of 10", shown["fps"]), shown["fps"]
    assert shown["reconnects"] == "0"
    assert re.fullmatch(r"\d+ \(\d+ in last 5 s\)", shown["drops"]), shown["drops"]
    assert re.fullmatch(r"Health changes \(\d+\)", shown["summary"]), shown["summary"]
    assert shown["history"] and set(shown["history"]) <= HEALTHS
    assert shown["history"][0] == shown["badge"], "newest first"
    page.find_element(By.CSS_SELECTOR, '[data-stream="road"] .health-history summary').click()
    screenshot(page, "streams-health")
    assert console_errors(page) == []


def test_snapshot_link_downloads_the_latest_frame_as_a_jpeg(daemon, page, tmp_path):
    page.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    page.get(f"{daemon.dashboard_url}/streams")
    image = '[data-stream="road"] img.frame-image'
    wait_for(
        lambda: page.execute_script(
            f"const i = document.querySelector('{image}'); return i && i.complete && i.naturalWidth;"
        ),
        30,
        what="a frame of stream 'road'",
    )
    page.find_element(By.CSS_SELECTOR, '[data-stream="road"] a.snapshot').click()
    [saved] = wait_for(
        lambda: [p for p in tmp_path.iterdir() if p.suffix == ".jpg"],
        30,
        what="the snapshot in the download folder",
    )
    assert re.fullmatch(r"road-\d{8}T\d{6}Z\.jpg", saved.name), saved.name
    data = saved.read_bytes()
    assert data[:3] == b"\xff\xd8\xff"
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert frame is not None and frame.shape[2] == 3
    with urllib.request.urlopen(
        f"{daemon.dashboard_url}/api/v1/streams/road/snapshot.jpg"
    ) as reply:
        assert reply.headers["Content-Type"] == "image/jpeg"
        assert reply.headers["Content-Disposition"].startswith('attachment; filename="road-')
    assert console_errors(page) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_board_and_streams_fit_a_phone_in_either_colour_scheme(daemon, page, scheme):
    set_viewport(page, PHONE, mobile=True)
    prefer_colour_scheme(page, scheme)
    for path, content in (
        ("/board", "#rails tr[data-rail]"),
        ("/streams", ".stream-health .state"),
    ):
        page.get(f"{daemon.dashboard_url}{path}")
        wait_for(lambda c=content: page.find_elements(By.CSS_SELECTOR, c), 30, what=path)
        width, inner = page.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth];"
        )
        assert inner == PHONE[0]
        assert width <= inner, (path, scheme, width)
        background = page.execute_script(
            "return getComputedStyle(document.querySelector('.card')).backgroundColor;"
        )
        red, green, blue = (int(part) for part in re.findall(r"\d+", background)[:3])
        dark = 0.2126 * red + 0.7152 * green + 0.0722 * blue < 60
        assert dark == (scheme == "dark"), (path, background)
        screenshot(page, f"phone-{scheme}{path.replace('/', '-')}")
        assert console_errors(page) == [], (path, scheme)
