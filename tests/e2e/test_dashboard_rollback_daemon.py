"""Rollback in poll mode against the real daemon: the dashboard parks the
newer version folder, the poller unloads it and the version policy serves
the older one; restore brings the newer one back."""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.request

import numpy as np
import tritonclient.http as httpclient
from werkzeug.security import generate_password_hash

from daemon_process import wait_for
from model_fixtures import add_add_sub, add_sub_infer_inputs

PASSWORD = "e2e password"


def request(opener, url: str, data: dict | None = None, token: str | None = None):
    body = json.dumps(data).encode() if data is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["X-CSRF-Token"] = token
    try:
        with opener.open(urllib.request.Request(url, body, headers), timeout=10) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def index_states(client) -> dict[str, str]:
    return {
        entry["version"]: entry["state"]
        for entry in client.get_model_repository_index()
        if entry["name"] == "add_sub" and entry.get("version")
    }


def infer_version(client) -> str:
    a = np.ones((1, 16), dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, a, a)
    return client.infer("add_sub", inputs).get_response()["model_version"]


def test_rollback_serves_the_older_version_and_restore_the_newer_again(tmp_path, start_daemon):
    repository = tmp_path / "models"
    model_dir = add_add_sub(repository, versions=(1, 2))
    daemon = start_daemon(
        repository,
        "--model-control-mode",
        "poll",
        "--repository-poll-secs",
        "0.2",
        "--dashboard-password-hash",
        generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000"),
    )
    client = httpclient.InferenceServerClient(daemon.url)
    assert infer_version(client) == "2"
    base = daemon.dashboard_url
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    _, session = request(opener, f"{base}/api/v1/session")
    status, login = request(opener, f"{base}/login", {"password": PASSWORD}, session["csrf_token"])
    assert (status, login["user"]) == (200, "admin")
    token = login["csrf_token"]

    status, answer = request(
        opener, f"{base}/api/v1/models/add_sub/rollback", {"version": 1}, token
    )
    assert (status, answer) == (
        200,
        {"model": "add_sub", "action": "rollback", "version": 1, "moved": [2]},
    )
    wait_for(lambda: index_states(client) == {"1": "READY"}, what="version 2 gone, 1 READY")
    assert infer_version(client) == "1"
    assert (model_dir / ".rolled-back" / "2" / "model.onnx").is_file()
    assert (
        "Dashboard: rollback user=admin from=127.0.0.1 model=add_sub version=1 result=ok "
        "moved_to_rolled_back=2"
    ) in daemon.log()

    status, answer = request(opener, f"{base}/api/v1/models/add_sub/restore", {}, token)
    assert (status, answer) == (200, {"model": "add_sub", "action": "restore", "moved": [2]})
    wait_for(lambda: index_states(client).get("2") == "READY", what="version 2 READY again")
    assert infer_version(client) == "2"
    assert "model 'add_sub' version 2: UNAVAILABLE" not in daemon.log()


def test_models_page_rolls_back_shows_a_refusal_and_restores(tmp_path, start_daemon):
    from dashboard.browser import headless_chromium, screenshot
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    repository = tmp_path / "models"
    model_dir = add_add_sub(repository, versions=(1, 2))
    daemon = start_daemon(
        repository,
        "--model-control-mode",
        "poll",
        "--repository-poll-secs",
        "0.2",
        "--dashboard-password-hash",
        generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000"),
    )
    base = daemon.dashboard_url

    def shown(selector: str) -> list[str]:
        try:
            return [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]
        except StaleElementReferenceException:
            return []

    def logged_in() -> bool:
        try:
            body = browser.find_element(By.TAG_NAME, "body")
            return body.get_attribute("data-logged-in") == "true"
        except StaleElementReferenceException:
            return False  # the page after the login is loading

    def versions_shown() -> list[tuple[str, str]]:
        rows = shown('[data-model="add_sub"] .versions tbody tr')
        return [tuple(row.split()[:2]) for row in rows]

    rollback = '[data-model="add_sub"] button[data-action="rollback"]:not([disabled])'
    restore = '[data-model="add_sub"] button[data-action="restore"]:not([disabled])'
    with headless_chromium(tmp_path / "chromedriver.log") as browser:
        browser.get(f"{base}/login")
        browser.find_element(By.ID, "username").send_keys("admin")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        browser.find_element(By.ID, "login-submit").click()
        wait_for(logged_in, 10, what="the page after logging in")
        browser.get(f"{base}/models")
        wait_for(lambda: versions_shown() == [("2", "READY")], 30, what="version 2 READY")
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, rollback), 10, what="rollback")
        options = '[data-model="add_sub"] select.rollback-version option'
        wait_for(lambda: shown(options) == ["version 1"], 10, what="the version to roll back to")
        assert browser.find_elements(By.CSS_SELECTOR, restore) == []

        (model_dir / ".rolled-back" / "2").mkdir(parents=True)
        browser.find_element(By.CSS_SELECTOR, rollback).click()
        wait_for(
            lambda: shown('[data-model="add_sub"] .action-error'),
            10,
            what="the refusal shown",
        )
        assert shown('[data-model="add_sub"] .action-error') == [
            "rollback 'add_sub' failed: model 'add_sub' rollback: '.rolled-back/2' already "
            "exists; restore it or move it away first"
        ]
        (model_dir / ".rolled-back" / "2").rmdir()

        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, rollback), 10, what="rollback")
        browser.find_element(By.CSS_SELECTOR, rollback).click()
        wait_for(lambda: versions_shown() == [("1", "READY")], 30, what="version 1 READY")
        wait_for(lambda: shown(restore) == ["Restore 2"], 10, what="the restore button")
        assert shown('[data-model="add_sub"] .action-error') == []
        screenshot(browser, "models-rolled-back")

        browser.find_element(By.CSS_SELECTOR, restore).click()
        wait_for(lambda: ("2", "READY") in versions_shown(), 30, what="version 2 READY again")
        # A poll that read the folders before the restore may show it once more.
        wait_for(lambda: shown(restore) == [], 10, what="the restore button gone")
        assert shown(rollback) == ["Roll back to"]
