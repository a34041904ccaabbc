"""An isolated python model (``EDGEBOX_ISOLATION: process``) through the real
daemon: ``os._exit()`` on a magic input answers 500 and leaves the daemon and
every other model serving; while its process is down the repository index
shows why and requests get 503; it comes back by itself; a model allocating
past its memory limit is stopped and reported the same way; and SIGTERM
reaps every model process without leaving shared memory behind."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import wait_for
from model_fixtures import add_python_xy

ISOLATED = """
parameters { key: "EDGEBOX_ISOLATION" value: { string_value: "process" } }
parameters { key: "EDGEBOX_MEMORY_LIMIT_MB" value: { string_value: "600" } }
"""

# Y = 2 X. X[0] == -1: os._exit(3); X[0] == -3: allocate 1 GiB. While the
# file 'hold' exists in the model folder, initialize fails, so a restart
# keeps failing until the test removes it.
CRASHY_MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if os.path.exists(os.path.join(args["model_repository"], "hold")):
            raise RuntimeError("held by the test")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == -1:
                os._exit(3)
            if x[0] == -3:
                np.ones(1 << 30, np.uint8)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return responses
"""

STEADY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + 1)]
            )
            for r in requests
        ]
"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    add_python_xy(repo, "crashy", CRASHY_MODEL, config_extra=ISOLATED)
    add_python_xy(repo, "steady", STEADY_MODEL)
    return repo


def infer(client: httpclient.InferenceServerClient, model: str, *values: float) -> np.ndarray:
    tensor = httpclient.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(np.array(values, np.float32))
    return client.infer(model, [tensor]).as_numpy("Y")


def infer_error(client, model: str, *values: float) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        infer(client, model, *values)
    return caught.value


def index_entry(url: str, model: str) -> dict:
    request = urllib.request.Request(f"http://{url}/v2/repository/index", data=b"{}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        entries = json.loads(reply.read())
    return next(e for e in entries if e["name"] == model and e.get("version") == "1")


def failed_restart(daemon) -> dict:
    """crashy's index entry once a restart failed (while the test holds it)."""
    return wait_for(
        lambda: "restart failed" in (e := index_entry(daemon.url, "crashy"))["reason"] and e,
        timeout_s=30,
        what="the failed restart in the repository index",
    )


def release_crashy(daemon, repository: Path) -> None:
    """Lets crashy start again and waits until it is READY."""
    (repository / "crashy" / "hold").unlink()
    wait_for(
        lambda: index_entry(daemon.url, "crashy")["state"] == "READY",
        timeout_s=60,
        what="the restarted model to be READY",
    )


def model_processes(daemon_pid: int) -> list[int]:
    """The daemon's children running an isolated model."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == daemon_pid and b"isolated_child" in command:
            pids.append(int(entry.name))
    return pids


def test_a_crashing_isolated_model_fails_alone_and_comes_back(start_daemon, repository) -> None:
    daemon = start_daemon(repository)
    client = httpclient.InferenceServerClient(daemon.url)
    try:
        np.testing.assert_array_equal(infer(client, "crashy", 1, 2), [2, 4])
        assert index_entry(daemon.url, "crashy")["reason"] == (
            "runs in its own process (memory limit: 600 MB)"
        )
        (pid,) = model_processes(daemon.process.pid)
        (repository / "crashy" / "hold").touch()

        crashed = infer_error(client, "crashy", -1, 0)
        assert crashed.status() == "500"
        assert crashed.message() == (
            "model 'crashy' version 1: python model process exited with code 3 during "
            f"execute() (instance 'crashy_0_0', pid {pid}); it is being restarted"
        )
        np.testing.assert_array_equal(infer(client, "steady", 1, 2), [2, 3])

        down = failed_restart(daemon)
        assert down["state"] == "UNAVAILABLE"
        assert down["reason"].startswith(
            "instance 'crashy_0_0': python model process exited with code 3; restart failed: "
            "model 'crashy' version 1: initialize() raised RuntimeError: held by the test "
            "(model.py line 10); restarting in "
        )
        refused = infer_error(client, "crashy", 1, 2)
        assert refused.status() == "503"
        assert refused.message() == (
            "model 'crashy' version 1: the python model process of instance 'crashy_0_0' "
            "exited with code 3 and is being restarted; retry later"
        )

        release_crashy(daemon, repository)
        np.testing.assert_array_equal(infer(client, "crashy", 3, 4), [6, 8])
        assert index_entry(daemon.url, "crashy")["reason"] == (
            "runs in its own process (memory limit: 600 MB)"
        )
        assert (
            "model 'crashy' version 1, instance 'crashy_0_0': python model process " in daemon.log()
        )
    finally:
        client.close()


def test_a_model_past_its_memory_limit_is_stopped_and_reported(start_daemon, repository) -> None:
    shm_before = set(os.listdir("/dev/shm"))
    daemon = start_daemon(repository)
    client = httpclient.InferenceServerClient(daemon.url)
    try:
        infer(client, "crashy", 1, 2)
        (repository / "crashy" / "hold").touch()
        error = infer_error(client, "crashy", -3, 0)
        assert error.status() == "500"
        assert error.message().startswith(
            "model 'crashy' version 1: execute() raised MemoryError: Unable to allocate 1.00 GiB"
        )
        assert error.message().endswith(
            "(model.py line 19); the python model process reached its memory limit of 600 MB "
            "and is being restarted"
        )
        reported = failed_restart(daemon)
        assert reported["state"] == "UNAVAILABLE"
        assert reported["reason"].startswith(
            "instance 'crashy_0_0': python model process reached its memory limit of 600 MB; "
            "restart failed: "
        )
        release_crashy(daemon, repository)
        np.testing.assert_array_equal(infer(client, "crashy", 1, 1), [2, 2])
        processes = model_processes(daemon.process.pid)
        assert len(processes) == 1
    finally:
        client.close()
    assert daemon.stop() == 0
    assert [pid for pid in processes if Path(f"/proc/{pid}").exists()] == []
    assert set(os.listdir("/dev/shm")) - shm_before == set()


def test_the_daemon_setting_isolates_models_that_do_not_choose(start_daemon, repository) -> None:
    daemon = start_daemon(repository, "--python-isolation", "process")
    client = httpclient.InferenceServerClient(daemon.url)
    try:
        np.testing.assert_array_equal(infer(client, "steady", 1, 2), [2, 3])
        assert index_entry(daemon.url, "steady")["reason"] == (
            "runs in its own process (memory limit: 2048 MB)"
        )
        assert len(model_processes(daemon.process.pid)) == 2
    finally:
        client.close()


HANGING_MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.entered = os.path.join(args["model_repository"], "entered")

    def execute(self, requests):
        open(self.entered, "w").close()
        time.sleep(600)
"""


def test_a_hung_isolated_model_does_not_outlive_the_daemon(start_daemon, tmp_path) -> None:
    repo = tmp_path / "repo"
    add_python_xy(repo, "hung", HANGING_MODEL, config_extra=ISOLATED)
    daemon = start_daemon(repo, "--exit-timeout-secs", "2")
    (pid,) = model_processes(daemon.process.pid)
    client = httpclient.InferenceServerClient(daemon.url, network_timeout=60)
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(infer(client, "hung", 1, 2))
        except Exception as exc:  # the daemon stops under it: any end will do
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    wait_for((repo / "hung" / "entered").exists, what="the model to be inside execute()")
    started = time.monotonic()
    assert daemon.stop() == 0
    assert time.monotonic() - started < 15
    assert not Path(f"/proc/{pid}").exists(), "the hung model process outlived the daemon"
    caller.join(30)
    assert outcome and not isinstance(outcome[0], np.ndarray)
    client.close()
