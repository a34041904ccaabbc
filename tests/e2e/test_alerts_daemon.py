"""Alerts end to end: the real daemon samples the AGX Orin fixture's sysfs
tree (tests/telemetry/fixtures/agx_orin, copied so a zone can be heated),
publishes to a real mosquitto and serves the dashboard to a real headless
Chromium. Heating the GPU zone past the alert and thermal-guard thresholds
raises the banner on every page (phone width and dark mode included), the
API lists the alerts, the events page has the rows and a subscriber gets the
``edgebox.alert`` events; cooling it clears them all."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest
from dashboard.browser import (
    PHONE,
    console_errors,
    headless_chromium,
    log_in,
    prefer_colour_scheme,
    screenshot,
    set_viewport,
    texts,
)
from dashboard.dashboard_client import PASSWORD, PASSWORD_HASH
from selenium.webdriver.common.by import By

from daemon_process import wait_for
from model_fixtures import add_add_sub
from mosquitto_broker import Subscriber, daemon_mqtt_flags

ORIN = Path(__file__).resolve().parents[1] / "telemetry" / "fixtures" / "agx_orin"
GPU_ZONE = "sys/class/thermal/thermal_zone1"
"""``gpu-thermal`` in the fixture, at 45.7 °C."""
PAGES = ("/", "/models", "/streams", "/events", "/logs", "/login")


@pytest.fixture
def orin_root(tmp_path) -> Path:
    root = Path(shutil.copytree(ORIN, tmp_path / "agx_orin"))
    assert (root / GPU_ZONE / "type").read_text().strip() == "gpu-thermal"
    return root


def set_gpu_temperature(root: Path, celsius: float) -> None:
    """What the kernel's thermal zone shows: millidegrees, written whole."""
    path = root / GPU_ZONE / "temp"
    staged = path.with_name("temp.new")
    staged.write_text(f"{int(celsius * 1000)}\n")
    staged.replace(path)


def active_alerts(dashboard_url: str) -> list[dict]:
    with urllib.request.urlopen(f"{dashboard_url}/api/v1/alerts", timeout=10) as reply:
        return json.loads(reply.read())["alerts"]


def alert_documents(subscriber: Subscriber, device_id: str, state: str) -> list[dict] | None:
    """The ``edgebox.alert`` payloads in ``state`` received so far; None until
    both rules' (temperature and throttling) have arrived."""
    documents = [json.loads(m.payload) for m in subscriber.messages(f"edgebox/{device_id}/events")]
    found = [d for d in documents if d["schema"]["name"] == "edgebox.alert" and d["state"] == state]
    return found if len(found) >= 2 else None


def banner_lines(driver) -> list[tuple[str, str]]:
    """(rule, severity) of each line the banner shows, [] while it is hidden;
    read in one script so a poll re-rendering the lines cannot interleave."""
    lines = driver.execute_script(
        """
        const banner = document.getElementById("alerts");
        if (!banner || banner.classList.contains("hidden")) return [];
        return [...banner.querySelectorAll(".alert")].map(
          (line) => [line.dataset.rule, line.dataset.severity]);
        """
    )
    return [tuple(line) for line in lines]


def luminance(driver, selector: str) -> float:
    colour = driver.execute_script(
        "return getComputedStyle(document.querySelector(arguments[0])).backgroundColor;", selector
    )
    red, green, blue = (int(part) for part in re.findall(r"\d+", colour)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


HOT = [("temperature", "critical"), ("throttling", "critical")]


def test_a_heated_zone_raises_the_banner_mqtt_and_events_and_cooling_clears_them(
    tmp_path, orin_root, start_daemon, mosquitto, device_id
):
    repository = tmp_path / "repo"
    add_add_sub(repository)
    config = tmp_path / "alerts.yaml"
    config.write_text(
        json.dumps(
            {
                "telemetry": {"source": "sysfs", "sysfs_root": str(orin_root), "interval_s": 0.2},
                "alerts": {
                    "interval_s": 0.2,
                    "temperature_warn_c": 80,
                    "temperature_critical_c": 90,
                },
                "dashboard": {"anonymous_read": True, "password_hash": PASSWORD_HASH},
            }
        )
    )
    flags = daemon_mqtt_flags(mosquitto.url, device_id, tmp_path / "spool.sqlite")
    with (
        Subscriber(mosquitto, f"edgebox/{device_id}/#") as subscriber,
        headless_chromium(tmp_path / "chromedriver.log") as browser,
    ):
        daemon = start_daemon(repository, "--config", str(config), *flags)
        browser.get(f"{daemon.dashboard_url}/models")
        wait_for(lambda: texts(browser, "[data-model]"), 30, what="the models page")
        assert active_alerts(daemon.dashboard_url) == []
        assert banner_lines(browser) == []

        set_gpu_temperature(orin_root, 96.0)
        alerts = wait_for(
            lambda: (a := active_alerts(daemon.dashboard_url)) and len(a) == 2 and a,
            30,
            what="the temperature and throttling alerts",
        )
        assert [(a["rule"], a["subject"], a["severity"]) for a in alerts] == [
            ("temperature", "gpu", "critical"),
            ("throttling", "gpu", "critical"),
        ]
        assert alerts[0]["message"] == "zone 'gpu' at 96.0 °C (warn 80, critical 90 °C)"
        wait_for(lambda: banner_lines(browser) == HOT, 10, what="the banner on the models page")
        assert "alerts-critical" in browser.find_element(By.ID, "alerts").get_attribute("class")
        screenshot(browser, "alerts-banner")
        raised = subscriber.wait_for(
            lambda _: alert_documents(subscriber, device_id, "raised"),
            10,
            what="the raised alerts on MQTT",
        )
        assert sorted((d["rule"], d["subject"]) for d in raised) == [
            ("temperature", "gpu"),
            ("throttling", "gpu"),
        ]

        set_viewport(browser, PHONE, mobile=True)
        prefer_colour_scheme(browser, "dark")
        for path in PAGES:
            browser.get(f"{daemon.dashboard_url}{path}")
            wait_for(lambda: banner_lines(browser) == HOT, 10, what=f"the banner on {path}")
            width, inner = browser.execute_script(
                "return [document.documentElement.scrollWidth, window.innerWidth];"
            )
            assert inner == PHONE[0] and width <= inner, (path, width)
            assert luminance(browser, "#alerts") < 90, path
            assert console_errors(browser) == [], path
        screenshot(browser, "alerts-banner-dark-phone")

        browser.get(f"{daemon.dashboard_url}/events")
        set_gpu_temperature(orin_root, 45.0)
        wait_for(lambda: active_alerts(daemon.dashboard_url) == [], 30, what="the alerts to clear")
        wait_for(lambda: banner_lines(browser) == [], 10, what="the banner to go")
        wait_for(
            lambda: len(texts(browser, 'tr[data-schema="edgebox.alert"] .details')) == 4,
            10,
            what="two raised and two cleared rows on the events page",
        )
        details = texts(browser, 'tr[data-schema="edgebox.alert"] .details')
        assert sum("state cleared" in d for d in details) == 2
        assert sum("state raised" in d for d in details) == 2
        assert all(re.search(r"since \d{1,2}:\d{2}:\d{2}", d) for d in details), details
        screenshot(browser, "alerts-cleared-events")
        cleared = subscriber.wait_for(
            lambda _: alert_documents(subscriber, device_id, "cleared"),
            10,
            what="the cleared alerts on MQTT",
        )
        assert sorted(d["rule"] for d in cleared) == ["temperature", "throttling"]
        assert console_errors(browser) == []


def test_without_a_login_the_banner_stays_hidden_and_goes_when_the_login_ends(
    tmp_path, orin_root, start_daemon
):
    repository = tmp_path / "repo"
    add_add_sub(repository)
    config = tmp_path / "alerts.yaml"
    config.write_text(
        json.dumps(
            {
                "telemetry": {"source": "sysfs", "sysfs_root": str(orin_root), "interval_s": 0.2},
                "alerts": {"interval_s": 0.2, "throttling": False},
                "dashboard": {
                    "password_hash": PASSWORD_HASH,
                    "session_lifetime_s": 8,
                    "session_idle_timeout_s": 8,
                },
            }
        )
    )
    set_gpu_temperature(orin_root, 92.0)
    with headless_chromium(tmp_path / "chromedriver.log") as browser:
        daemon = start_daemon(repository, "--config", str(config))
        wait_for(lambda: "alert raised: temperature 'gpu'" in daemon.log(), 30, what="the alert")
        browser.get(f"{daemon.dashboard_url}/login")
        assert browser.find_element(By.ID, "alerts").get_attribute("data-readable") == "false"
        assert banner_lines(browser) == []
        assert console_errors(browser) == []
        log_in(browser, f"{daemon.dashboard_url}/login?next=/models", PASSWORD)
        wait_for(lambda: banner_lines(browser) == [("temperature", "critical")], 10, what="banner")
        wait_for(lambda: banner_lines(browser) == [], 30, what="the banner once the login ended")
        wait_for(
            lambda: "Not allowed" in browser.find_element(By.ID, "connection").text,
            10,
            what="the page's own poll to say the login ended",
        )
