"""The history in the real daemon: real tritonclient traffic shows in the 1 h
tier, a SIGTERM writes the tier to the state directory, and the next start
on that directory serves it again."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import tritonclient.http as httpclient

from daemon_process import DaemonProcess, explicit_control, wait_for


def history(daemon: DaemonProcess, query: str) -> dict:
    with urllib.request.urlopen(f"{daemon.dashboard_url}/api/v1/history?{query}", timeout=10) as r:
        return json.loads(r.read())


def test_the_coarse_tiers_survive_a_restart(add_sub_repository, start_daemon, tmp_path):
    state = tmp_path / "state"
    flags = [
        *explicit_control("add_sub"),
        "--history-interval-s",
        "1",
        "--dashboard-anonymous-read",
        "true",
        "--state-directory",
        str(state),
    ]
    first = start_daemon(add_sub_repository, *flags)
    data = np.ones((1, 16), dtype=np.float32)
    inputs = [httpclient.InferInput(name, [1, 16], "FP32") for name in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(data)

    with httpclient.InferenceServerClient(first.url) as client:

        def busy_hour_point() -> list:
            client.infer("add_sub", inputs)  # paced by wait_for's poll interval
            series = history(first, "range=1h&model=add_sub")["models"]
            return series and [r for r in series[0]["values"]["requests_per_s"] if r > 0]

        wait_for(busy_hour_point, 90, what="a 1 h point with requests (20 s steps)")
    before = history(first, "range=1h&model=add_sub")["models"][0]
    assert first.stop() == 0
    assert (state / "history.json.gz").is_file()

    second = start_daemon(add_sub_repository, *flags)
    (after,) = history(second, "range=1h&model=add_sub")["models"]
    kept = len(before["timestamps"])
    assert after["timestamps"][:kept] == before["timestamps"]
    assert after["values"]["requests_per_s"][:kept] == before["values"]["requests_per_s"]
    assert "history: restored the 1 h and 24 h tiers" in second.log()
