"""The dashboard in a real headless Chromium against the real daemon: the demo
repository in explicit mode with every model loaded, the synthetic road stream,
anonymous reading on and an ``admin`` password set. Screenshots of every page
land in ``tests/artifacts/`` (docs/dashboard.png is a copy of the overview's).

One daemon and one browser serve the whole module: each starts in seconds on
a two-core machine. A test that needs to be anonymous deletes the cookies
first; the one that unloads a model loads it again."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from dashboard.browser import (
    PHONE,
    WINDOW,
    console_errors,
    headless_chromium,
    log_in,
    prefer_colour_scheme,
    screenshot,
    set_viewport,
    texts,
)
from dashboard.dashboard_client import PASSWORD, PASSWORD_HASH
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from daemon_process import DaemonProcess, explicit_control, wait_for
from model_fixtures import copy_demo_repository

STREAM = "[{name: road, source: 'synthetic:road', model: lane_pipeline, fps: 10}]"
UNKNOWN = "\u2013"
"""The en dash the pages show for a value not known yet."""


@pytest.fixture(scope="module")
def repository(repository):
    return copy_demo_repository(repository)


@pytest.fixture(scope="module")
def daemon_args(module_path):
    config = module_path / "dashboard.yaml"
    config.write_text(
        json.dumps(
            {
                "dashboard": {
                    "anonymous_read": True,
                    "password_hash": PASSWORD_HASH,
                    "session_key_path": str(module_path / "session.key"),
                },
            }
        )
    )
    return ["--config", str(config), *explicit_control("*")]


@pytest.fixture(scope="module")
def daemon_env():
    return {"EDGEBOX_STREAMS": STREAM}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromedriver") / "chromedriver.log") as driver:
        yield driver


@pytest.fixture
def anonymous(browser):
    """The browser with no session: cookies from an earlier login are gone."""
    browser.delete_all_cookies()
    return browser


def chart_points(driver, chart_id: str) -> int:
    value = driver.find_element(By.CSS_SELECTOR, f"#{chart_id} .chart").get_attribute("data-points")
    return int(value or 0)


def version_state(driver, model: str) -> str | None:
    states = texts(driver, f'[data-model="{model}"] .versions .version-state')
    return states[0] if states else None


def api_json(daemon: DaemonProcess, path: str) -> dict:
    with urllib.request.urlopen(f"{daemon.dashboard_url}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def post_status(opener, url: str, headers: dict | None = None, form: dict | None = None) -> int:
    data = urllib.parse.urlencode(form).encode() if form is not None else b"{}"
    request = urllib.request.Request(url, data=data, method="POST", headers=headers or {})
    try:
        with opener.open(request, timeout=30) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def test_overview_shows_the_demo_models_and_charts_that_grow(daemon, anonymous):
    anonymous.get(f"{daemon.dashboard_url}/")
    names = wait_for(
        lambda: (
            {"lane_pipeline", "lane_detector", "add_sub"}
            <= set(texts(anonymous, "#model-names [data-model] a"))
        ),
        30,
        what="the demo models on the overview",
    )
    assert names
    first = wait_for(lambda: chart_points(anonymous, "chart-cpu"), 30, what="a CPU chart with data")
    wait_for(
        lambda: chart_points(anonymous, "chart-cpu") > first,
        30,
        what=f"the CPU chart to grow past {first} points",
    )
    for chart in ("chart-cpu", "chart-memory", "chart-temperatures", "chart-power", "chart-gpu"):
        assert anonymous.find_elements(By.CSS_SELECTOR, f"#{chart} .uplot canvas"), chart
    latest = api_json(daemon, "/api/v1/telemetry?seconds=5")["samples"][-1]
    gpu_note = anonymous.find_element(By.CSS_SELECTOR, "#chart-gpu .chart-note").text
    assert gpu_note == ("no GPU" if latest["gpu"] is None else "")
    assert anonymous.find_element(By.ID, "streams-count").text == "1"
    assert texts(anonymous, "#device-model") not in ([], [""], [UNKNOWN])
    screenshot(anonymous, "overview")
    assert console_errors(anonymous) == []


def test_streams_page_shows_the_latest_frame_and_refreshes_it(daemon, anonymous):
    anonymous.get(f"{daemon.dashboard_url}/streams")
    image = '[data-stream="road"] img.frame-image'
    wait_for(
        lambda: anonymous.execute_script(
            f"const i = document.querySelector('{image}'); return i && i.complete && i.naturalWidth;"
        ),
        30,
        what="a decoded frame of stream 'road'",
    )
    first = anonymous.find_element(By.CSS_SELECTOR, image).get_attribute("src")
    wait_for(
        lambda: anonymous.find_element(By.CSS_SELECTOR, image).get_attribute("src") != first,
        10,
        what="the frame to be asked for again",
    )
    wait_for(
        lambda: texts(anonymous, '[data-stream="road"] .stream-state') == ["running"],
        30,
        what="stream 'road' shown running",
    )
    wait_for(
        lambda: (
            texts(anonymous, '[data-stream="road"] [data-latency="inference"]')
            not in ([], [f"{UNKNOWN} ms"])
        ),
        30,
        what="the latency breakdown of stream 'road'",
    )
    wait_for(
        lambda: (
            texts(anonymous, '[data-stream="road"] [data-result-latency="p99"]')
            not in ([], [f"{UNKNOWN} ms"])
        ),
        30,
        what="the read-to-result distribution of stream 'road'",
    )
    shown = texts(anonymous, '[data-stream="road"] .histogram-count')
    assert shown and sum(map(int, shown)) == int(
        texts(anonymous, '[data-stream="road"] [data-result-latency="count"]')[0]
    )
    screenshot(anonymous, "streams")
    assert console_errors(anonymous) == []


def test_events_page_lists_model_events_newest_first(daemon, anonymous):
    anonymous.get(f"{daemon.dashboard_url}/events")
    wait_for(
        lambda: anonymous.find_elements(By.CSS_SELECTOR, 'tr[data-schema="edgebox.model_state"]'),
        30,
        what="model events on the events page",
    )
    rows = anonymous.find_elements(By.CSS_SELECTOR, "#events tr")
    ids = [int(row.get_attribute("data-id")) for row in rows]
    assert ids == sorted(ids, reverse=True)
    details = " ".join(texts(anonymous, 'tr[data-schema="edgebox.model_state"] .details'))
    assert "lane_detector" in details
    assert "READY" in details
    screenshot(anonymous, "events")


PAGES = {
    "overview": ("/", "#chart-cpu .uplot"),
    "models": ("/models", '[data-model="add_sub"] .versions td.reason'),
    "streams": ("/streams", '[data-stream="road"] .stream-state'),
    "events": ("/events", "#events tr"),
    "board": ("/board", "#cores .core"),
    "login": ("/login", "#login-form"),
    "history": ("/history?model=add_sub", "#chart-requests .uplot"),
}


@pytest.fixture
def sized(anonymous):
    """The anonymous browser; its viewport and colour scheme back to the
    desktop's defaults afterwards, whatever the test set."""
    yield anonymous
    set_viewport(anonymous, WINDOW)
    prefer_colour_scheme(anonymous, "")


def page_width(driver) -> tuple[int, int]:
    return driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth];"
    )


def element_width(driver, selector: str) -> float:
    return driver.execute_script(
        "return document.querySelector(arguments[0]).getBoundingClientRect().width;", selector
    )


@pytest.mark.parametrize(
    ("size", "mobile", "label"), [(PHONE, True, "phone"), (WINDOW, False, "desktop")]
)
def test_every_page_fits_the_screen_without_scrolling_sideways(daemon, sized, size, mobile, label):
    console_errors(sized)
    set_viewport(sized, size, mobile)
    for page, (path, content) in PAGES.items():
        sized.get(f"{daemon.dashboard_url}{path}")
        wait_for(lambda c=content: sized.find_elements(By.CSS_SELECTOR, c), 30, what=page)
        assert sized.execute_script("return window.innerWidth;") == size[0]
        scroll_width, inner_width = page_width(sized)
        assert scroll_width <= inner_width, (page, label, scroll_width, inner_width)
        screenshot(sized, f"{label}-{page}")
        assert console_errors(sized) == [], (page, label)
    sized.get(f"{daemon.dashboard_url}/models")
    reason = '[data-model="add_sub"] .versions td.reason'
    wait_for(lambda: sized.find_elements(By.CSS_SELECTOR, reason), 30, what="add_sub's reason")
    # A reason squeezed to a letter a line is a few pixels wide; 40 characters need ~250.
    assert element_width(sized, reason) >= min(250, size[0] * 0.6), label


def test_charts_follow_the_window_down_to_a_phone(daemon, sized):
    sized.get(f"{daemon.dashboard_url}/")
    chart = "#chart-cpu .uplot"
    wait_for(lambda: sized.find_elements(By.CSS_SELECTOR, chart), 30, what="the CPU chart")
    desktop = element_width(sized, chart)
    set_viewport(sized, PHONE, mobile=True)
    wait_for(
        lambda: (
            desktop > element_width(sized, chart) <= element_width(sized, "#chart-cpu .chart") + 1
        ),
        10,
        what="the CPU chart within its card at a phone's width",
    )
    assert page_width(sized)[0] <= PHONE[0]


def luminance(driver, selector: str) -> float:
    """The element's background's brightness, 0 (black) to 255 (white)."""
    colour = driver.execute_script(
        "return getComputedStyle(document.querySelector(arguments[0])).backgroundColor;", selector
    )
    red, green, blue = (int(part) for part in re.findall(r"\d+", colour)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def test_dark_mode_follows_the_system_setting(daemon, sized):
    sized.get(f"{daemon.dashboard_url}/models")
    card = '[data-model="add_sub"]'
    wait_for(lambda: sized.find_elements(By.CSS_SELECTOR, card), 30, what="add_sub's card")
    assert luminance(sized, "body") > 200
    prefer_colour_scheme(sized, "dark")
    assert luminance(sized, "body") < 60
    assert luminance(sized, card) < 60
    screenshot(sized, "dark-models")
    set_viewport(sized, PHONE, mobile=True)
    sized.get(f"{daemon.dashboard_url}/")
    wait_for(lambda: sized.find_elements(By.CSS_SELECTOR, "#chart-cpu .uplot"), 30, what="a chart")
    assert luminance(sized, "body") < 60
    screenshot(sized, "dark-phone-overview")
    assert console_errors(sized) == []


def test_wrong_password_is_refused(daemon, anonymous):
    anonymous.get(f"{daemon.dashboard_url}/login")
    anonymous.find_element(By.ID, "username").send_keys("admin")
    anonymous.find_element(By.ID, "password").send_keys("not the password")
    anonymous.find_element(By.ID, "login-submit").click()
    error = wait_for(lambda: texts(anonymous, "#login-error"), 10, what="the login error")
    assert error == ["wrong user name or password"]
    assert anonymous.find_element(By.TAG_NAME, "body").get_attribute("data-logged-in") == "false"
    screenshot(anonymous, "login-refused")


def test_unload_without_login_is_refused(daemon):
    opener = urllib.request.build_opener()
    status = post_status(opener, f"{daemon.dashboard_url}/api/v1/models/add_sub/unload")
    assert status in (401, 403)
    models = {m["name"]: m for m in api_json(daemon, "/api/v1/models")["models"]}
    assert [v["state"] for v in models["add_sub"]["versions"]] == ["READY"]


def logged_in_opener(daemon: DaemonProcess) -> tuple[urllib.request.OpenerDirector, str]:
    """A cookie-keeping client logged in as admin, and its CSRF token."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )

    def csrf_token() -> str:
        with opener.open(f"{daemon.dashboard_url}/login", timeout=10) as reply:
            page = reply.read().decode()
        return re.search(r'<meta name="csrf-token" content="([^"]+)"', page).group(1)

    status = post_status(
        opener,
        f"{daemon.dashboard_url}/login",
        form={"username": "admin", "password": PASSWORD, "csrf_token": csrf_token()},
    )
    assert status == 200  # the redirect after a login, followed
    return opener, csrf_token()


def test_post_without_csrf_token_is_refused(daemon):
    opener, token = logged_in_opener(daemon)
    url = f"{daemon.dashboard_url}/api/v1/models/add_sub/unload"
    assert post_status(opener, url, headers={"Content-Type": "application/json"}) == 403
    assert post_status(opener, url, headers={"X-CSRF-Token": "forged"}) == 403
    load = f"{daemon.dashboard_url}/api/v1/models/add_sub/load"
    assert post_status(opener, load, headers={"X-CSRF-Token": token}) == 200
    models = {m["name"]: m for m in api_json(daemon, "/api/v1/models")["models"]}
    assert [v["state"] for v in models["add_sub"]["versions"]] == ["READY"]


def test_logged_in_unload_button_changes_the_state_shown(daemon, anonymous):
    browser = anonymous
    browser.get(f"{daemon.dashboard_url}/models")
    wait_for(lambda: version_state(browser, "add_sub") == "READY", 30, what="add_sub READY")
    assert browser.find_elements(By.CSS_SELECTOR, "button[data-action]") == []

    log_in(browser, f"{daemon.dashboard_url}/login", PASSWORD)
    browser.get(f"{daemon.dashboard_url}/models")
    unload = '[data-model="add_sub"] button[data-action="unload"]:not([disabled])'
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, unload), 30, what="the unload button")
    assert texts(browser, '[data-model="add_sub"] .used-by') == ["used by square_diff"]

    # add_sub is a step of the loaded ensemble square_diff: the page asks first.
    browser.find_element(By.CSS_SELECTOR, unload).click()
    question = wait_for(lambda: alert_text(browser), 10, what="the unload's question")
    assert question == (
        "Unloading 'add_sub' also unloads the loaded ensembles that use it: "
        "'square_diff'. Unload them all?"
    )
    browser.switch_to.alert.dismiss()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, unload), 10, what="unload again")
    assert version_state(browser, "add_sub") == "READY"
    assert version_state(browser, "square_diff") == "READY"
    assert texts(browser, '[data-model="add_sub"] .action-error') == []

    browser.find_element(By.CSS_SELECTOR, unload).click()
    wait_for(lambda: alert_text(browser), 10, what="the unload's question")
    browser.switch_to.alert.accept()
    wait_for(
        lambda: version_state(browser, "add_sub") not in (None, "READY", "UNLOADING"),
        30,
        what="add_sub no longer shown READY",
    )
    assert version_state(browser, "add_sub") == "UNAVAILABLE"
    wait_for(
        lambda: version_state(browser, "square_diff") == "UNAVAILABLE",
        10,
        what="square_diff unloaded with add_sub",
    )
    assert texts(browser, '[data-model="add_sub"] .action-error') == []
    screenshot(browser, "models-unloaded")

    for model in ("add_sub", "square_diff"):
        load = f'[data-model="{model}"] button[data-action="load"]'
        wait_for(
            lambda load=load: browser.find_elements(By.CSS_SELECTOR, f"{load}:not([disabled])"),
            10,
            what=f"{model}'s load button",
        )
        browser.find_element(By.CSS_SELECTOR, load).click()
        wait_for(lambda m=model: version_state(browser, m) == "READY", 30, what=f"{model} READY")
    screenshot(browser, "models")


def alert_text(driver) -> str | None:
    """The open dialog's text; None while there is none."""
    try:
        return driver.switch_to.alert.text
    except NoAlertPresentException:
        return None


@pytest.mark.parametrize("asked", ["/%09/evil.example", "/%5Cevil.example"])
def test_a_login_link_cannot_send_the_browser_off_site(daemon, anonymous, asked):
    # The link a phisher would send: the login page carries ``next`` into its
    # form, and Chromium would read /<tab>/evil.example as //evil.example.
    log_in(anonymous, f"{daemon.dashboard_url}/login?next={asked}", PASSWORD)
    assert anonymous.current_url == f"{daemon.dashboard_url}/"
