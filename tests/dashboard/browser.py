"""A headless Chromium for the dashboard tests: Debian's ``chromium`` driven by
its ``chromedriver`` through Selenium (``make test`` installs both when
missing), a 1280x900 window, and screenshots saved under ``tests/artifacts/``
(git-ignored) for a person to look at after a run.

The browser runs with a throwaway profile and no network beyond what the page
asks for, which in these tests is only 127.0.0.1. Selenium Manager is never
asked to download a driver: the paths are Debian's, and a missing one is a
test failure that names the package to install.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from daemon_process import wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
WINDOW = (1280, 900)


def missing_browser() -> str | None:
    """Why the browser cannot start, or None when Debian's packages are installed."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"'{path}' is missing: sudo apt-get install {package} (make test does this)"
    return None


@contextmanager
def headless_chromium(log_path: Path | None = None) -> Iterator[WebDriver]:
    """Yields a started driver and quits it afterwards, whatever the test did.

    ``log_path`` receives chromedriver's log, useful when the browser fails to
    start (a sandbox or shared-memory problem in a container)."""
    problem = missing_browser()
    if problem:
        raise AssertionError(problem)
    profile = tempfile.mkdtemp(prefix="edgebox-chromium-")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        # Containers and root users have no usable sandbox; the pages are our own.
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(
        executable_path=str(CHROMEDRIVER),
        log_output=str(log_path) if log_path else None,
    )
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.set_window_size(*WINDOW)
        # The window includes the (invisible) browser frame: pin the page's own
        # viewport so screenshots are exactly WINDOW.
        set_viewport(driver, WINDOW)
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


PHONE = (390, 844)
"""A phone's viewport in CSS pixels (an iPhone 12 to 15's), for the layout tests."""


def set_viewport(driver: WebDriver, size: tuple[int, int], mobile: bool = False) -> None:
    """The page's viewport as ``size``; ``mobile`` also applies the page's
    viewport meta tag as a phone's browser does. Pages already open resize."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": mobile},
    )


def prefer_colour_scheme(driver: WebDriver, scheme: str) -> None:
    """What ``prefers-color-scheme`` answers from now on: "dark", "light", or
    "" for the system's own."""
    features = [{"name": "prefers-color-scheme", "value": scheme}] if scheme else []
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def screenshot(driver: WebDriver, name: str) -> Path:
    """Saves the viewport as ``tests/artifacts/<name>.png`` and returns the path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    path = ARTIFACTS / f"{safe}.png"
    driver.save_screenshot(str(path))
    return path


def console_errors(driver: WebDriver) -> list[str]:
    """The page's console messages at SEVERE level since the last call (script
    errors, CSP refusals, failed fetches), for tests that pin a clean console."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def texts(driver: WebDriver, selector: str) -> list[str]:
    """The text of every element matching ``selector``; [] while the page
    re-renders them under us."""
    try:
        return [element.text for element in driver.find_elements(By.CSS_SELECTOR, selector)]
    except StaleElementReferenceException:
        return []


def logged_in(driver: WebDriver) -> bool:
    """The page says a user is logged in; False while a page is loading
    (the login form's submit lands on another page)."""
    try:
        body = driver.find_element(By.TAG_NAME, "body")
        return body.get_attribute("data-logged-in") == "true"
    except (NoSuchElementException, StaleElementReferenceException):
        return False


def log_in(driver: WebDriver, login_url: str, password: str) -> None:
    """Opens ``login_url`` (the dashboard's /login, maybe with ``?next=``),
    logs in as admin and waits for the page after it."""
    driver.get(login_url)
    driver.find_element(By.ID, "username").send_keys("admin")
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login-submit").click()
    wait_for(lambda: logged_in(driver), 10, what="the page after logging in")
