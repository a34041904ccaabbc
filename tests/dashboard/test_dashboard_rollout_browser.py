"""The models page's rollout panel in a real headless Chromium: web/'s own
templates and scripts, served by the dashboard's waitress port over the
in-process stack with a real shadow rollout (rollout_setup.py). The page
polls /api/v1/models, so each click is checked by what the page shows next
and by what the daemon's rollouts say."""

from __future__ import annotations

import pytest
from browser import console_errors, headless_chromium, log_in, screenshot, texts
from dashboard_client import PASSWORD, PASSWORD_HASH, dashboard_deps
from rollout_setup import DISAGREEMENT, SAMPLES_WANTED, answer_requests
from selenium.webdriver.common.by import By

from daemon_process import wait_for
from edgebox.dashboard.app import create_app
from edgebox.dashboard.server import DashboardServer
from edgebox.dashboard.settings import DashboardSettings

PANEL = '[data-model="xy"] .rollout'
UNKNOWN = "\u2013"


@pytest.fixture
def dashboard_url(stack, model_in_rollout, tmp_path_factory):
    """A dashboard over ``stack`` with web/'s pages, on a free port."""
    state = tmp_path_factory.mktemp("state")
    settings = DashboardSettings(password_hash=PASSWORD_HASH, session_key_path=state / "key")
    app = create_app(dashboard_deps(stack), settings, session_key=b"k" * 32)
    server = DashboardServer(app, "127.0.0.1", 0)
    port = server.start()
    yield f"http://127.0.0.1:{port}"
    assert server.stop(5)


def button(browser, action: str):
    found = browser.find_elements(
        By.CSS_SELECTOR, f'{PANEL} button[data-action="rollout-{action}"]:not([disabled])'
    )
    return found[0] if found else None


def figure(browser, key: str) -> str | None:
    shown = texts(browser, f'{PANEL} [data-figure="{key}"]')
    return shown[0] if shown else None


def stage(browser) -> str | None:
    panels = browser.find_elements(By.CSS_SELECTOR, PANEL)
    return panels[0].get_attribute("data-stage") if panels else None


def test_the_panel_shows_the_rollout_and_its_buttons_abort_release_promote_and_roll_back(
    stack, dashboard_url, tmp_path
):
    answer_requests(stack, 2)
    rollouts = stack.repository_control
    with headless_chromium(tmp_path / "chromedriver.log") as browser:
        log_in(browser, f"{dashboard_url}/login?next=/models", PASSWORD)
        wait_for(lambda: figure(browser, "samples") == f"2 / {SAMPLES_WANTED}", 15, what="samples")
        assert stage(browser) == "shadow"
        [title] = texts(browser, f"{PANEL} .rollout-title")
        assert title.startswith("shadow version 2 against serving version 1, since ")
        assert figure(browser, "agreement") == "0.0 % (0 of 2 agree)"
        assert figure(browser, "dropped") == "0"
        assert figure(browser, "last_disagreement") == DISAGREEMENT
        headings = texts(browser, f"{PANEL} .rollout-latency thead th")
        assert headings == ["", "version 2 (new)", "version 1 (serving)"]
        p95 = texts(browser, f'{PANEL} .rollout-latency tr[data-row="p95"] td')
        assert len(p95) == 2 and UNKNOWN not in p95 and all(t.endswith(" ms") for t in p95)
        assert texts(browser, f"{PANEL} .rollout-buttons button") == ["Promote", "Abort"]
        screenshot(browser, "models-rollout-shadow")

        button(browser, "abort").click()
        wait_for(lambda: button(browser, "release"), 15, what="the Release button")
        [held] = texts(browser, f'{PANEL} .rollout-held li[data-version="2"]')
        assert held.startswith("version 2 rejected since ")
        assert held.endswith(": rollout: aborted by the operator")
        assert (stage(browser), button(browser, "promote")) == ("none", None)
        assert [h["version"] for h in rollouts.rollout_status("xy")["held"]] == [2]

        button(browser, "release").click()
        wait_for(lambda: button(browser, "promote"), 15, what="a rollout in progress again")
        assert stage(browser) == "shadow"
        assert texts(browser, f"{PANEL} .rollout-held li") == []
        assert rollouts.rollout_status("xy")["held"] == []

        button(browser, "promote").click()
        wait_for(lambda: stage(browser) == "watching", 15, what="the watch window")
        assert figure(browser, "watch_until") not in (None, "", UNKNOWN)
        assert figure(browser, "watch_requests") == "0"
        assert texts(browser, f"{PANEL} .rollout-latency thead th") == [
            "",
            "version 2 (promoted)",
            "version 1 (previous)",
        ]
        assert texts(browser, f"{PANEL} .rollout-buttons button") == ["Roll back"]
        assert rollouts.rollout_status("xy")["stage"] == "watching"
        screenshot(browser, "models-rollout-watching")
        assert texts(browser, '[data-model="xy"] .action-error') == []

        button(browser, "abort").click()
        wait_for(
            lambda: rollouts.rollout_status("xy").get("last", {}).get("result") == "rolled_back",
            15,
            what="the rollback",
        )
        wait_for(lambda: stage(browser) != "watching", 15, what="the panel to leave the watch")
        assert console_errors(browser) == []
