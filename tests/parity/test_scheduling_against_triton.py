"""Issue 22's scheduling features against the reference Triton, both started
with ``--rate-limit execution_count --rate-limit-resource R1:2``: requests of
every priority answered alike, a model whose instance needs more of a
resource than the command line gives fails its load with Triton's reason, and
a default priority level outside the levels is refused with Triton's words.
What the order of batches is under priorities is pinned in
tests/scheduling/test_dynamic_batcher_priority.py (a timing-free fake
instance); here only what a client can read is compared."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest

from daemon_process import DaemonProcess, wait_for
from model_fixtures import PYTHON_XY_CONFIG, PYTHON_XY_IDENTITY, write_model
from parity.conftest import free_port
from parity.test_differential import call
from scripts.triton_reference import DEFAULT_HOME, Reference

FLAGS = ("--rate-limit", "execution_count", "--rate-limit-resource", "R1:2")

URGENT = """
name: "urgent"
backend: "python"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { priority_levels: 3 default_priority_level: 2 }
instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R1" count: 1 } ] } } ]
"""

GREEDY = PYTHON_XY_CONFIG.format(name="greedy") + (
    'instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R1" count: 4 } ] '
    "priority: 2 } } ]\n"
)

BAD_LEVEL = URGENT.replace('"urgent"', '"bad_level"').replace(
    "default_priority_level: 2", "default_priority_level: 5"
)

RESOURCE_REASON = (
    'Resource count for "R1" is limited to 2 which will prevent scheduling of one or more '
    "model instances, the minimum required count is 4"
)
LEVEL_REASON = "default priority level must be in range [1, 3] for bad_level"


def infer(priority: object) -> bytes:
    body: dict = {
        "inputs": [{"name": "X", "shape": [1, 2], "datatype": "FP32", "data": [3, 4]}],
    }
    if priority is not None:
        body["parameters"] = {"priority": priority}
    return json.dumps(body).encode()


PRIORITIES = [None, 0, 1, 3, 9]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scheduling") / "models"
    write_model(root, "urgent", URGENT, {"1/model.py": PYTHON_XY_IDENTITY})
    write_model(root, "greedy", GREEDY, {"1/model.py": PYTHON_XY_IDENTITY})
    write_model(root, "bad_level", BAD_LEVEL, {"1/model.py": PYTHON_XY_IDENTITY})
    return root


@pytest.fixture(scope="module")
def triton_limited(source, tmp_path_factory):
    reference = Reference(DEFAULT_HOME)
    if not reference.installed():
        pytest.fail("the reference Triton is not installed: run `make test-parity`")
    folder = tmp_path_factory.mktemp("triton")
    shutil.copytree(source, folder / "models")
    http = free_port()
    process = reference.launch(
        folder / "models",
        http,
        free_port(),
        free_port(),
        folder / "triton.log",
        (*FLAGS, "--exit-on-error=false"),
    )
    url = f"127.0.0.1:{http}"
    try:
        wait_for(
            lambda: process.poll() is None and model_ready(url, "urgent"),
            60,
            what="the reference Triton",
        )
        yield url, folder / "triton.log"
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def edgebox_limited(source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("edgebox")
    shutil.copytree(source, folder / "models")
    args = ["--model-control-mode", "none", *FLAGS]
    with DaemonProcess(folder / "models", folder / "daemon.log", args) as daemon:
        yield daemon.url


def model_ready(url: str, model: str) -> bool:
    """Triton with a model that failed is never ready as a whole (strict
    readiness), so the model that loads is asked instead."""
    try:
        return call(url, "GET", f"/v2/models/{model}/ready", None)[0] == 200
    except OSError:
        return False


def reason(url: str, model: str) -> str:
    request = urllib.request.Request(f"http://{url}/v2/repository/index", data=b"{}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        entries = {e["name"]: e for e in json.load(reply)}
    return entries.get(model, {}).get("reason", "")


@pytest.mark.parametrize("priority", PRIORITIES)
def test_requests_of_every_priority_are_answered_alike(triton_limited, edgebox_limited, priority):
    path = "/v2/models/urgent/infer"
    theirs = call(triton_limited[0], "POST", path, infer(priority))
    ours = call(edgebox_limited, "POST", path, infer(priority))
    assert theirs[0] == ours[0] == 200
    assert theirs[1]["outputs"][0]["data"] == ours[1]["outputs"][0]["data"]


def test_a_resource_too_small_for_an_instance_fails_the_load_alike(
    triton_limited, edgebox_limited
):
    assert RESOURCE_REASON in reason(triton_limited[0], "greedy")
    assert RESOURCE_REASON in reason(edgebox_limited, "greedy")
    assert call(triton_limited[0], "GET", "/v2/models/greedy/ready", None)[0] == 400
    assert call(edgebox_limited, "GET", "/v2/models/greedy/ready", None)[0] == 400


def test_a_default_level_outside_the_levels_is_refused_in_triton_words(
    triton_limited, edgebox_limited
):
    """Triton leaves the model out of its index and logs the reason; edgebox
    lists it UNAVAILABLE with the same words after the file and line."""
    wait_for(lambda: LEVEL_REASON in triton_limited[1].read_text(), 10, what="Triton's log")
    assert LEVEL_REASON in reason(edgebox_limited, "bad_level")


@pytest.mark.parametrize("priority", ["high", -1])
def test_a_priority_that_is_no_unsigned_integer_is_a_400_where_triton_answers_500(
    triton_limited, edgebox_limited, priority
):
    """A listed difference (docs/api.md): the client's mistake is a 400 in
    edgebox; Triton 2.51 answers 500 'Unable to parse'."""
    path = "/v2/models/urgent/infer"
    theirs = call(triton_limited[0], "POST", path, infer(priority))
    ours = call(edgebox_limited, "POST", path, infer(priority))
    assert theirs == (
        500,
        {
            "error": "Unable to parse 'priority': attempt to access JSON "
            "non-unsigned-integer as unsigned-integer"
        },
    )
    assert ours[0] == 400
    assert "parameter 'priority' must be an unsigned integer" in ours[1]["error"]
