"""The History page and the overview's time ranges in a real headless
Chromium against the real daemon: add_sub served in explicit mode, the
history read every second (``--history-interval-s 1``), and real inference
traffic from tritonclient, paced, while the charts are watched.

One daemon and one browser serve the whole module."""

from __future__ import annotations

import csv
import io
import json
import threading

import numpy as np
import pytest
import tritonclient.http as httpclient
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

from daemon_process import explicit_control, wait_for
from edgebox.history.counters import MODEL_COLUMNS
from model_fixtures import add_add_sub

PACE_S = 0.01
MAX_REQUESTS = 20_000


@pytest.fixture(scope="module")
def repository(repository):
    add_add_sub(repository)
    return repository


@pytest.fixture(scope="module")
def daemon_args(module_path):
    config = module_path / "dashboard.yaml"
    config.write_text(json.dumps({"dashboard": {"anonymous_read": True}}))
    return ["--config", str(config), "--history-interval-s", "1", *explicit_control("add_sub")]


@pytest.fixture(scope="module")
def traffic(daemon):
    """add_sub asked over HTTP by tritonclient about every 10 ms on a thread
    of its own until the module ends (or MAX_REQUESTS); yields the count sent."""
    stop = threading.Event()
    sent = [0]

    def send() -> None:
        data = np.arange(16, dtype=np.float32).reshape(1, 16)
        with httpclient.InferenceServerClient(daemon.url) as client:
            inputs = [httpclient.InferInput(name, [1, 16], "FP32") for name in ("INPUT0", "INPUT1")]
            for tensor in inputs:
                tensor.set_data_from_numpy(data)
            while not stop.is_set() and sent[0] < MAX_REQUESTS:
                client.infer("add_sub", inputs)
                sent[0] += 1
                stop.wait(PACE_S)

    thread = threading.Thread(target=send, name="traffic", daemon=True)
    thread.start()
    yield sent
    stop.set()
    thread.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromedriver") / "chromedriver.log") as driver:
        yield driver


@pytest.fixture
def sized(browser):
    yield browser
    set_viewport(browser, WINDOW)
    prefer_colour_scheme(browser, "")


def chart_points(driver, chart: str) -> int:
    value = driver.find_element(By.CSS_SELECTOR, f"#{chart} .chart").get_attribute("data-points")
    return int(value or 0)


def fetched_in_page(driver, url: str) -> str:
    """``url`` fetched by the page itself (its cookies, its origin), as the
    link's download would be."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'})"
        ".then(r => r.text()).then(done, e => done('failed: ' + e));",
        url,
    )


def page_fits(driver) -> bool:
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth;"
    )


def test_per_model_charts_grow_under_load(daemon, traffic, sized):
    sized.get(f"{daemon.dashboard_url}/history?model=add_sub")
    first = wait_for(lambda: chart_points(sized, "chart-requests"), 60, what="a requests chart")
    wait_for(
        lambda: chart_points(sized, "chart-requests") > first,
        30,
        what=f"the requests chart to grow past {first} points",
    )
    for chart in (
        "chart-requests",
        "chart-latency",
        "chart-queue",
        "chart-failures",
        "chart-batch",
    ):
        assert sized.find_elements(By.CSS_SELECTOR, f"#{chart} .uplot canvas"), chart
    legend = [e.text for e in sized.find_elements(By.CSS_SELECTOR, "#chart-latency .u-legend th")]
    assert any("v1 p99" in text for text in legend), legend
    select = sized.find_element(By.ID, "history-model")
    assert select.get_attribute("value") == "add_sub"
    assert traffic[0] > 0
    document = json.loads(fetched_in_page(sized, "/api/v1/history?range=15m&model=add_sub"))
    (series,) = document["models"]
    assert max(series["values"]["requests_per_s"]) > 0
    assert max(v for v in series["values"]["p99_us"] if v is not None) > 0
    screenshot(sized, "history")
    assert console_errors(sized) == []


def test_range_selector_switches_and_the_csv_link_downloads_what_is_shown(daemon, traffic, sized):
    sized.get(f"{daemon.dashboard_url}/history?model=add_sub")
    wait_for(lambda: chart_points(sized, "chart-requests"), 60, what="a requests chart")
    sized.find_element(By.CSS_SELECTOR, '#range-picker [data-range="1h"]').click()
    assert "range=1h" in sized.current_url
    pressed = sized.find_element(By.CSS_SELECTOR, '#range-picker [aria-pressed="true"]')
    assert pressed.get_attribute("data-range") == "1h"
    link = sized.find_element(By.ID, "history-csv").get_attribute("href")
    assert link.endswith("/api/v1/history?range=1h&model=add_sub&format=csv")
    # The 1 h tier steps 20 s: its first point comes 20 s after the daemon's first reading.
    wait_for(lambda: chart_points(sized, "chart-requests"), 60, what="a point of the 1 h tier")
    text = fetched_in_page(sized, link)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["time_utc", "timestamp", "model", "version", *MODEL_COLUMNS]
    assert len(rows) > 1
    assert {row[2] for row in rows[1:]} == {"add_sub"}
    shown = json.loads(fetched_in_page(sized, link.replace("&format=csv", "")))
    assert [float(row[1]) for row in rows[1:]] == shown["models"][0]["timestamps"]
    sized.find_element(By.CSS_SELECTOR, '#range-picker [data-range="24h"]').click()
    assert (
        sized.find_element(By.ID, "history-csv")
        .get_attribute("href")
        .endswith("range=24h&model=add_sub&format=csv")
    )
    assert console_errors(sized) == []


def test_overview_range_selector_shows_the_device_history(daemon, traffic, sized):
    sized.get(f"{daemon.dashboard_url}/")
    wait_for(lambda: chart_points(sized, "chart-cpu"), 30, what="the live CPU chart")
    sized.find_element(By.CSS_SELECTOR, '#range-picker [data-range="1h"]').click()
    link = sized.find_element(By.ID, "telemetry-csv").get_attribute("href")
    assert link.endswith("/api/v1/history?series=device&range=1h&format=csv")
    shown = json.loads(fetched_in_page(sized, link.replace("&format=csv", "")))
    wait_for(
        lambda: chart_points(sized, "chart-cpu") >= len(shown["device"]["timestamps"]) > 0,
        60,
        what="the CPU chart drawn from the 1 h tier",
    )
    rows = list(csv.reader(io.StringIO(fetched_in_page(sized, link))))
    assert rows[0][:3] == ["time_utc", "timestamp", "cpu_pct"]
    assert len(rows) > 1
    sized.refresh()
    wait_for(lambda: chart_points(sized, "chart-cpu"), 60, what="the 1 h chart after a reload")
    pressed = sized.find_element(By.CSS_SELECTOR, '#range-picker [aria-pressed="true"]')
    assert pressed.get_attribute("data-range") == "1h"
    screenshot(sized, "overview-1h")
    assert console_errors(sized) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_history_pages_fit_a_phone_in_either_scheme(daemon, traffic, sized, scheme):
    console_errors(sized)
    set_viewport(sized, PHONE, mobile=True)
    prefer_colour_scheme(sized, scheme)
    for path, chart in (
        ("/history?model=add_sub&range=15m", "chart-requests"),
        ("/?range=1h", "chart-cpu"),
    ):
        sized.get(f"{daemon.dashboard_url}{path}")
        wait_for(lambda c=chart: chart_points(sized, c), 60, what=f"a chart on {path}")
        assert sized.execute_script("return window.innerWidth;") == PHONE[0]
        assert page_fits(sized), (path, scheme)
        screenshot(sized, f"phone-{scheme}-{path.strip('/').split('?')[0] or 'overview'}-history")
    assert console_errors(sized) == []
