"""A decoupled model that never sends a request's final does not hold the
daemon's shutdown: past half of ``exit_timeout_secs`` the held requests fail
UNAVAILABLE, their streams get the error, and the daemon exits 0."""

from __future__ import annotations

import http.client
import json
import queue
import time

import numpy as np
import tritonclient.grpc as grpcclient

from daemon_process import DaemonProcess
from model_fixtures import add_decoupled_repeat

HELD_TEXT = (
    "model 'repeat' version 1: the server is shutting down before the model sent the "
    "request's final response"
)


def test_held_requests_fail_at_shutdown(tmp_path) -> None:
    add_decoupled_repeat(tmp_path / "repo")
    daemon = DaemonProcess(tmp_path / "repo", tmp_path / "daemon.log", ["--exit-timeout-secs", "4"])
    daemon.start()
    try:
        host, port = daemon.url.split("//")[-1].rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        body = json.dumps({"IN": [1], "mode": "hold"})
        connection.request("POST", "/v2/models/repeat/generate_stream", body)
        response = connection.getresponse()
        assert response.status == 200
        answers: queue.Queue = queue.Queue()
        client = grpcclient.InferenceServerClient(daemon.grpc_url)
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        held = grpcclient.InferInput("IN", [1], "INT32")
        held.set_data_from_numpy(np.array([5], np.int32))
        client.async_stream_infer("repeat", [held], parameters={"mode": "hold"})
        assert answers.get(timeout=30)[1] is None
        started = time.monotonic()
        assert daemon.stop() == 0, daemon.log()
        assert time.monotonic() - started < 4
        events = response.read().decode()
        assert events == (
            'data: {"OUT": 1, "IDX": 0, "model_name": "repeat", "model_version": "1"}\n\n'
            f'data: {{"error": "{HELD_TEXT}"}}\n\n'
        )
        _, error = answers.get(timeout=30)
        assert error.message() == HELD_TEXT
        client.stop_stream()
        client.close()
    finally:
        daemon.stop()
