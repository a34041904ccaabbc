"""The control API cannot freeze the real daemon (issue 9, item 2): a huge
warm-up, an ensemble that calls itself and too many instances are refused with
a precise 400 before anything changes, too many threads per instance fail the
load with the setting named; other loads go on meanwhile; a load in progress
never holds up another model's load or unload; and SIGTERM during a long load
(a warm-up, a slow ``initialize``) stops the daemon within
``exit_timeout_secs``."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control, wait_for
from model_fixtures import (
    add_add_sub,
    add_python_xy,
    add_sub_json_config,
    write_model,
)

EXIT_TIMEOUT_S = 2.0
EXIT_SLACK_S = 3.0
"""Interpreter start-up is not in the budget, its teardown is: a few seconds."""

WAIT_FOR_RELEASE = """
import os
import time


def wait_for_release(folder):
    open(os.path.join(folder, "entered"), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(folder, "release")):
        if time.monotonic() > deadline:
            raise TimeoutError("the test never released the model")
        time.sleep(0.01)
"""

SLOW_INITIALIZE = (
    WAIT_FOR_RELEASE
    + """

class TritonPythonModel:
    def initialize(self, args):
        wait_for_release(args["model_repository"])

    def execute(self, requests):
        return []
"""
)

GATED_EXECUTE = (
    WAIT_FOR_RELEASE
    + """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]

    def execute(self, requests):
        wait_for_release(self.folder)
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""
)

XY = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}],
}


def warmup(count: int) -> list[dict]:
    return [
        {
            "name": "w",
            "batch_size": 1,
            "count": count,
            "inputs": {"X": {"data_type": "TYPE_FP32", "dims": [2], "zero_data": True}},
        }
    ]


def ensemble(step: str) -> dict:
    is_echo = step == "echo"
    return {
        "platform": "ensemble",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": step,
                    "model_version": -1,
                    "input_map": {"X" if is_echo else "IN": "IN"},
                    "output_map": {"Y" if is_echo else "OUT": "OUT"},
                }
            ]
        },
    }


def refused(client, name: str, config: dict) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name, config=json.dumps(config))
    return info.value


def echoes(client, model: str, input_name: str = "X") -> bool:
    x = httpclient.InferInput(input_name, [2], "FP32")
    x.set_data_from_numpy(np.array([1.0, 2.0], dtype=np.float32))
    result = client.infer(model, [x])
    return result.as_numpy(result.get_response()["outputs"][0]["name"]).tolist() == [1.0, 2.0]


def index_entry(client, name: str) -> dict:
    return next(entry for entry in client.get_model_repository_index() if entry["name"] == name)


@pytest.fixture
def repository(tmp_path):
    repo = tmp_path / "repo"
    add_python_xy(repo, "echo")
    add_python_xy(repo, "quick")
    add_add_sub(repo, "add_sub")
    for name in ("a", "b"):
        write_model(repo, name, 'platform: "ensemble"\n', {"1/.keep": ""})
    return repo


@pytest.fixture
def explicit(start_daemon, repository):
    daemon = start_daemon(
        repository,
        *explicit_control("echo"),
        "--max-threads-per-instance",
        "4",
    )
    with httpclient.InferenceServerClient(daemon.url, network_timeout=30.0) as client:
        yield client


def test_a_billion_warmup_requests_are_refused_and_other_loads_go_on(explicit):
    error = refused(explicit, "quick", {**XY, "model_warmup": warmup(10**9)})
    assert error.status() == "400"
    assert error.message() == (
        "load failed for model 'quick': model_warmup asks for 1000000000 requests in all (the sum of every "
        "entry's count), more than the 1000 allowed (setting 'max_warmup_requests')"
    )
    assert "state" not in index_entry(explicit, "quick"), "a refused override changed the model"
    explicit.load_model("quick")
    assert echoes(explicit, "quick")


def test_ensemble_overrides_that_reach_themselves_are_refused(explicit):
    error = refused(explicit, "a", ensemble("a"))
    assert (error.status(), error.message()) == (
        "400",
        "load failed for model 'a': ensemble 'a': steps form a cycle 'a' -> 'a'",
    )
    explicit.load_model("a", config=json.dumps(ensemble("echo")))
    explicit.load_model("b", config=json.dumps(ensemble("a")))
    error = refused(explicit, "a", ensemble("b"))
    assert (error.status(), error.message()) == (
        "400",
        "load failed for model 'a': ensemble 'a': steps form a cycle 'a' -> 'b' -> 'a'",
    )
    assert echoes(explicit, "b", input_name="IN"), "the refused override changed what 'a' runs"


def test_instances_and_threads_over_the_caps_are_refused(explicit):
    crowd = {**XY, "instance_group": [{"kind": "KIND_CPU", "count": 100000}]}
    error = refused(explicit, "quick", crowd)
    assert (error.status(), error.message()) == (
        "400",
        "load failed for model 'quick': instance_group asks for 100000 instances, more than the 16 allowed "
        "per model (setting 'max_instances_per_model')",
    )
    threads = {"parameters": {"intra_op_thread_count": {"string_value": "800"}}}
    add_sub = add_sub_json_config(name=None) | threads
    error = refused(explicit, "add_sub", add_sub)
    assert error.status() == "400"
    assert error.message() == (
        "load failed for model 'add_sub': version 1 is at UNAVAILABLE state: "
        "parameter 'intra_op_thread_count' is 800, "
        "more than the 4 threads allowed per instance (setting 'max_threads_per_instance')"
    )
    assert not explicit.is_model_ready("add_sub")
    assert echoes(explicit, "echo")


def stop_within_the_exit_timeout(daemon) -> None:
    started = time.monotonic()
    code = daemon.stop(timeout_s=EXIT_TIMEOUT_S + 10)
    elapsed = time.monotonic() - started
    assert code == 0, daemon.log()
    assert elapsed < EXIT_TIMEOUT_S + EXIT_SLACK_S, f"took {elapsed:.1f}s:\n{daemon.log()}"
    assert "stopped" in daemon.log()


def test_sigterm_during_a_slow_initialize_exits_within_the_exit_timeout(start_daemon, tmp_path):
    repo = tmp_path / "repo"
    folder = add_python_xy(repo, "slow", SLOW_INITIALIZE)
    add_add_sub(repo, "add_sub")
    daemon = start_daemon(repo, "--exit-timeout-secs", str(EXIT_TIMEOUT_S), wait_ready=False)
    try:
        wait_for(lambda: (folder / "entered").exists(), 30, what="initialize to be entered")
        stop_within_the_exit_timeout(daemon)
    finally:
        (folder / "release").touch()
    assert "model 'slow' is still loading at the exit deadline; left behind" in daemon.log()


def test_a_long_warmup_blocks_no_other_model_and_sigterm_stops_it(start_daemon, repository):
    slow = add_python_xy(repository, "slow_warm", GATED_EXECUTE)
    daemon = start_daemon(
        repository,
        *explicit_control(),
        "--exit-timeout-secs",
        str(EXIT_TIMEOUT_S),
    )
    outcome: dict = {}

    def load_slow() -> None:
        with httpclient.InferenceServerClient(daemon.url, network_timeout=60.0) as own:
            try:
                own.load_model("slow_warm", config=json.dumps({**XY, "model_warmup": warmup(900)}))
                outcome["loaded"] = True
            except Exception as exc:  # a refusal, or the connection closing at shutdown
                outcome["error"] = exc

    loader = threading.Thread(target=load_slow, name="load-slow_warm")
    loader.start()
    try:
        wait_for(lambda: (slow / "entered").exists(), 30, what="the warm-up to reach the model")
        with httpclient.InferenceServerClient(daemon.url, network_timeout=10.0) as client:
            client.load_model("quick")
            assert echoes(client, "quick")
            client.unload_model("quick")
            assert index_entry(client, "slow_warm")["state"] == "LOADING"
        stop_within_the_exit_timeout(daemon)
    finally:
        (slow / "release").touch()
        loader.join(30)
    assert "loaded" not in outcome, "the warm-up ran to the end instead of stopping"
