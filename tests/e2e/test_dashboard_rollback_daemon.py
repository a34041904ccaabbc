"""Rollback in poll mode against the real daemon: the dashboard parks the
newer version folder, the poller unloads it and the version policy serves
the older one; restore brings the newer one back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.http as httpclient
from dashboard.dashboard_client import PASSWORD, PASSWORD_HASH, cookie_opener, json_request

from daemon_process import DaemonProcess, wait_for
from model_fixtures import add_add_sub, add_sub_infer_inputs


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


def start_polling_with_two_versions(start_daemon, tmp_path) -> tuple[DaemonProcess, Path]:
    """A daemon in poll mode serving add_sub's versions 1 and 2, with a dashboard
    password; and add_sub's folder."""
    model_dir = add_add_sub(tmp_path / "models", versions=(1, 2))
    daemon = start_daemon(
        model_dir.parent,
        *("--model-control-mode", "poll", "--repository-poll-secs", "0.2"),
        *("--dashboard-password-hash", PASSWORD_HASH),
    )
    return daemon, model_dir


def test_rollback_serves_the_older_version_and_restore_the_newer_again(tmp_path, start_daemon):
    daemon, model_dir = start_polling_with_two_versions(start_daemon, tmp_path)
    client = httpclient.InferenceServerClient(daemon.url)
    assert infer_version(client) == "2"
    base = daemon.dashboard_url
    opener = cookie_opener()
    _, session, _ = json_request(opener, f"{base}/api/v1/session")
    status, login, _ = json_request(
        opener, f"{base}/login", {"password": PASSWORD}, session["csrf_token"]
    )
    assert (status, login["user"]) == (200, "admin")
    token = login["csrf_token"]

    status, answer, _ = json_request(
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

    status, answer, _ = json_request(opener, f"{base}/api/v1/models/add_sub/restore", {}, token)
    assert (status, answer) == (200, {"model": "add_sub", "action": "restore", "moved": [2]})
    wait_for(lambda: index_states(client).get("2") == "READY", what="version 2 READY again")
    assert infer_version(client) == "2"
    assert "model 'add_sub' version 2: UNAVAILABLE" not in daemon.log()


def test_models_page_rolls_back_shows_a_refusal_and_restores(tmp_path, start_daemon):
    from dashboard.browser import headless_chromium, log_in, screenshot, texts
    from selenium.webdriver.common.by import By

    daemon, model_dir = start_polling_with_two_versions(start_daemon, tmp_path)
    base = daemon.dashboard_url

    def versions_texts(
        browser,
    ) -> list[tuple[str, str]]:
        rows = texts(browser, '[data-model="add_sub"] .versions tbody tr')
        return [tuple(row.split()[:2]) for row in rows]

    rollback = '[data-model="add_sub"] button[data-action="rollback"]:not([disabled])'
    restore = '[data-model="add_sub"] button[data-action="restore"]:not([disabled])'
    with headless_chromium(tmp_path / "chromedriver.log") as browser:
        log_in(browser, f"{base}/login", PASSWORD)
        browser.get(f"{base}/models")
        wait_for(
            lambda: (
                versions_texts(
                    browser,
                )
                == [("2", "READY")]
            ),
            30,
            what="version 2 READY",
        )
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, rollback), 10, what="rollback")
        options = '[data-model="add_sub"] select.rollback-version option'
        wait_for(
            lambda: texts(browser, options) == ["version 1"], 10, what="the version to roll back to"
        )
        assert browser.find_elements(By.CSS_SELECTOR, restore) == []

        (model_dir / ".rolled-back" / "2").mkdir(parents=True)
        browser.find_element(By.CSS_SELECTOR, rollback).click()
        wait_for(
            lambda: texts(browser, '[data-model="add_sub"] .action-error'),
            10,
            what="the refusal shown",
        )
        assert texts(browser, '[data-model="add_sub"] .action-error') == [
            "rollback 'add_sub' failed: model 'add_sub' rollback: '.rolled-back/2' already "
            "exists; restore it or move it away first"
        ]
        (model_dir / ".rolled-back" / "2").rmdir()

        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, rollback), 10, what="rollback")
        browser.find_element(By.CSS_SELECTOR, rollback).click()
        wait_for(
            lambda: (
                versions_texts(
                    browser,
                )
                == [("1", "READY")]
            ),
            30,
            what="version 1 READY",
        )
        wait_for(lambda: texts(browser, restore) == ["Restore 2"], 10, what="the restore button")
        assert texts(browser, '[data-model="add_sub"] .action-error') == []
        screenshot(browser, "models-rolled-back")

        browser.find_element(By.CSS_SELECTOR, restore).click()
        wait_for(
            lambda: (
                ("2", "READY")
                in versions_texts(
                    browser,
                )
            ),
            30,
            what="version 2 READY again",
        )
        # A poll that read the folders before the restore may show it once more.
        wait_for(lambda: texts(browser, restore) == [], 10, what="the restore button gone")
        assert texts(browser, rollback) == ["Roll back to"]
