"""Rollouts in the real daemon, in poll mode, as a user meets them: a new
version dropped into the repository while clients send requests, and a
version that kills the daemon, restarted as systemd restarts it."""

from __future__ import annotations

import json
import threading
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from daemon_process import DaemonProcess, wait_for
from rollout_models import (
    EXITS,
    FAILING,
    RIGHT,
    SEGFAULT,
    SLOW,
    SWAPPED,
    add_sub_inputs,
    add_sub_py,
    drop_version,
    fails_after,
)

POLL = ["--repository-poll-secs", "0.2"]


def _index(daemon: DaemonProcess) -> dict[str, dict]:
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/repository/index", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return {e.get("version", ""): e for e in json.loads(reply.read()) if e["name"] == "add_sub"}


def _infer(client: httpclient.InferenceServerClient) -> tuple[str, bool]:
    a, b = add_sub_inputs()
    inputs = [
        httpclient.InferInput("INPUT0", [16], "FP32"),
        httpclient.InferInput("INPUT1", [16], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub", inputs)
    return result.get_response()["model_version"], bool(
        np.array_equal(result.as_numpy("OUTPUT0"), a + b)
    )


class HttpTraffic:
    """One tritonclient HTTP client sending add_sub requests back to back on
    a thread of its own until stopped: the (version, right answer) pairs it
    got, and how many requests failed."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self._daemon = daemon
        self.answers: dict[tuple[str, bool], int] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> HttpTraffic:
        self._thread.start()
        wait_for(lambda: self.answers, 20, what="traffic")
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        client = httpclient.InferenceServerClient(self._daemon.url)
        while not self._stop.is_set():
            try:
                answer = _infer(client)
            except Exception:
                self.failed += 1
                continue
            self.answers[answer] = self.answers.get(answer, 0) + 1


def _state(daemon: DaemonProcess, version: str) -> str:
    return _index(daemon).get(version, {}).get("state", "")


def test_a_wrong_version_dropped_in_under_traffic_never_answers_a_client(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="shadow", samples=30)
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:
        with HttpTraffic(daemon) as traffic:
            drop_version(model_dir, 2, SWAPPED)
            wait_for(lambda: _state(daemon, "2") == "UNAVAILABLE", 30, what="version 2 rejected")
        rejected = _index(daemon)
    assert set(traffic.answers) == {("1", True)}, traffic.answers
    assert traffic.failed == 0
    assert rejected["2"]["reason"].startswith("rollout: 0/")
    assert "OUTPUT0 max |diff| 4.0 > atol 1e-05" in rejected["2"]["reason"]
    assert rejected["1"]["state"] == "READY"


def test_an_identical_version_is_promoted_and_the_old_one_unloads_after_its_watch(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="shadow", samples=20, watch_s=1)
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:
        with HttpTraffic(daemon) as traffic:
            drop_version(model_dir, 2, RIGHT)
            wait_for(lambda: _state(daemon, "1") == "UNAVAILABLE", 30, what="version 1 unloaded")
        index = _index(daemon)
    assert index["2"]["state"] == "READY"
    assert index["2"]["reason"].startswith("rollout: promoted (20/20 answers agree")
    assert set(traffic.answers) == {("1", True), ("2", True)} and traffic.failed == 0


def test_a_slow_version_fails_the_latency_gate_under_traffic(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="shadow", samples=10)
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:
        with HttpTraffic(daemon) as traffic:
            drop_version(model_dir, 2, SLOW)
            wait_for(lambda: _state(daemon, "2") == "UNAVAILABLE", 60, what="version 2 rejected")
        reason = _index(daemon)["2"]["reason"]
    assert reason.startswith("rollout: p95 latency "), reason
    assert set(traffic.answers) == {("1", True)}


def test_a_canary_at_20_percent_that_errors_is_rolled_back_after_one_failure(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="canary", canary_percent=20, samples=20)
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:
        with HttpTraffic(daemon) as traffic:
            drop_version(model_dir, 2, FAILING)
            wait_for(lambda: _state(daemon, "2") == "UNAVAILABLE", 30, what="the canary rejected")
            answered_before = sum(traffic.answers.values())
            wait_for(
                lambda: sum(traffic.answers.values()) > answered_before + 20, 30, what="traffic"
            )
        reason = _index(daemon)["2"]["reason"]
    assert traffic.failed == 1
    assert set(traffic.answers) == {("1", True)}
    assert reason.startswith("rollout: 1/1 requests failed on the new version")


def test_a_promoted_version_that_starts_failing_is_rolled_back_and_its_folder_parked(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="shadow", samples=10, watch_s=120)
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:
        with HttpTraffic(daemon) as traffic:
            drop_version(model_dir, 2, fails_after(30))
            wait_for(
                lambda: (model_dir / ".rolled-back" / "2" / "model.py").exists(),
                60,
                what="version 2 rolled back and parked",
            )
            wait_for(lambda: "2" not in _index(daemon), 30, what="the poller to drop version 2")
        index = _index(daemon)
    assert index["1"]["state"] == "READY"
    # The rollout thread rolls back after the first failure; a request or two
    # the client sends before it has may still reach version 2 (with exactly
    # one failure asserted, 2 of 8 runs failed, on this commit and before it).
    assert ("2", True) in traffic.answers and 1 <= traffic.failed <= 3
    assert not (model_dir / "2").exists()


@pytest.mark.parametrize(
    ("body", "died"),
    [(SEGFAULT, "the daemon died (SIGSEGV) while"), (EXITS, "the daemon died while")],
    ids=["segfault", "os_exit"],
)
def test_a_version_that_kills_the_daemon_is_quarantined_after_one_restart(tmp_path, body, died):
    repository = tmp_path / "repo"
    model_dir = add_sub_py(repository)
    log = tmp_path / "daemon.log"
    first = DaemonProcess(repository, log, POLL).start()
    client = httpclient.InferenceServerClient(first.url)
    assert _infer(client) == ("1", True)
    drop_version(model_dir, 2, body)
    wait_for(lambda: _index(first).get("2", {}).get("state") == "READY", 20, what="version 2")
    with pytest.raises(Exception):  # noqa: B017 - the daemon dies mid-request
        _infer(client)
    assert first.process.wait(30) != 0
    first.stop()

    for _restart in range(2):
        daemon = DaemonProcess(repository, log, POLL).start()
        try:
            index = _index(daemon)
            assert index["2"]["state"] == "UNAVAILABLE"
            assert index["2"]["reason"].startswith(f"quarantined: {died} version 2 was executing")
            assert index["2"]["reason"].endswith("remove the folder or release it")
            assert _infer(httpclient.InferenceServerClient(daemon.url)) == ("1", True)
        finally:
            assert daemon.stop() == 0, daemon.log()
