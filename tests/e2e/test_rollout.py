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
from rollout_models import EXITS, SEGFAULT, SWAPPED, add_sub_inputs, add_sub_py, drop_version

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


def test_a_wrong_version_dropped_in_under_traffic_never_answers_a_client(tmp_path):
    model_dir = add_sub_py(tmp_path / "repo", rollout="shadow", samples=30)
    answers: dict[tuple[str, bool], int] = {}
    stop = threading.Event()
    with DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", POLL) as daemon:

        def traffic() -> None:
            client = httpclient.InferenceServerClient(daemon.url)
            while not stop.is_set():
                answer = _infer(client)
                answers[answer] = answers.get(answer, 0) + 1

        thread = threading.Thread(target=traffic)
        thread.start()
        try:
            wait_for(lambda: answers, 20, what="traffic")
            drop_version(model_dir, 2, SWAPPED)
            rejected = wait_for(
                lambda: (
                    _index(daemon).get("2", {}).get("state") == "UNAVAILABLE" and _index(daemon)
                ),
                30,
                what="version 2 rejected",
            )
        finally:
            stop.set()
            thread.join(30)
    assert set(answers) == {("1", True)}, answers
    assert rejected["2"]["reason"].startswith("rollout: 0/")
    assert "OUTPUT0 max |diff| 4.0 > atol 1e-05" in rejected["2"]["reason"]
    assert rejected["1"]["state"] == "READY"


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
