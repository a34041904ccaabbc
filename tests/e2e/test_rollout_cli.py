"""``edgebox rollout`` as an operator runs it, against the real daemon in poll
mode: python models whose version 2, copied in beside version 1, stays in
shadow rollout (it waits for 100000 samples) until the command decides.

The daemon restricts the ``model-repository`` API to header
``edgebox-api-key``, the header ``--api-key-file`` sends: it listens on
127.0.0.1 only, where the appliance's default asks no key, so this is how
the test sees the key arrive (the loopback default itself is pinned in
tests/protocol/http/test_rollout_routes.py).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from cli_helpers import run_edgebox
from daemon_process import wait_for
from model_fixtures import add_python_xy
from rollout_models import add_shadow_model, publish_version

API_KEY = "0123456789abcdef0123456789abcdef"
ABORTED = "rollout: aborted by the operator"


@pytest.fixture(scope="module")
def repository(repository):
    add_shadow_model(repository, "road")
    add_shadow_model(repository, "lane")
    add_python_xy(repository, "plain")
    return repository


@pytest.fixture(scope="module")
def key_file(module_path) -> Path:
    path = module_path / "api.key"
    path.write_text(API_KEY + "\n")
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def daemon_args():
    return [
        *("--model-control-mode", "poll", "--repository-poll-secs", "0.2"),
        *("--http-restricted-api", f"model-repository:edgebox-api-key={API_KEY}"),
    ]


def version_status(daemon, model: str, version: str) -> tuple[str, str]:
    with httpclient.InferenceServerClient(daemon.url) as client:
        index = client.get_model_repository_index(headers={"edgebox-api-key": API_KEY})
    for entry in index:
        if entry["name"] == model and entry.get("version") == version:
            return entry["state"], entry.get("reason", "")
    return "", ""


def in_rollout(daemon, model: str) -> bool:
    state, reason = version_status(daemon, model, "2")
    return state == "LOADING" and reason.startswith("rollout:")


@pytest.fixture(scope="module")
def road(daemon, repository) -> str:
    """``road``'s version 2 in shadow rollout for the rest of the module."""
    publish_version(repository / "road", 2)
    wait_for(lambda: in_rollout(daemon, "road"), 60, what="road version 2 in rollout")
    return "road"


def rollout(daemon, key_file, *args: str):
    return run_edgebox("rollout", *args, "--url", daemon.url, "--api-key-file", str(key_file))


def test_status_summarises_the_rollout_in_progress(daemon, key_file, road):
    result = rollout(daemon, key_file, "status", road)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("road: shadow rollout of version 2 against version 1, since ")
    assert lines[1:] == [
        "  samples     0/100000",
        "  agreement   - (0 of 0)",
        "  errors      0",
        "  p95         version 2 -, version 1 -",
    ]


def test_status_json_is_the_daemons_rollout_resource(daemon, key_file, road):
    result = rollout(daemon, key_file, "status", road, "--json")
    assert result.returncode == 0
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/repository/models/road/rollout",
        headers={"edgebox-api-key": API_KEY},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert json.loads(result.stdout) == json.load(reply)
    document = json.loads(result.stdout)
    assert (document["stage"], document["version"], document["serving_version"]) == (
        "shadow",
        2,
        1,
    )


def test_status_without_a_model_lists_the_rollouts_in_progress(daemon, key_file, road):
    result = rollout(daemon, key_file, "status")
    assert result.returncode == 0
    headlines = [line for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert any(line.startswith("road: shadow rollout of version 2") for line in headlines)
    assert not any(line.startswith("plain:") for line in headlines)
    listed = json.loads(rollout(daemon, key_file, "status", "--json").stdout)
    assert "road" in [document["model"] for document in listed]


def test_abort_holds_the_version_release_lets_it_roll_out_again_promote_serves_it(
    daemon, key_file, repository
):
    publish_version(repository / "lane", 2)
    wait_for(lambda: in_rollout(daemon, "lane"), 60, what="lane version 2 in rollout")

    aborted = rollout(daemon, key_file, "abort", "lane")
    assert (aborted.returncode, aborted.stderr) == (0, "")
    lines = aborted.stdout.splitlines()
    assert lines[0] == "lane: no rollout in progress"
    assert lines[1].startswith("  held        version 2, rejected since ")
    assert lines[1].endswith(f": {ABORTED}")
    assert version_status(daemon, "lane", "2") == ("UNAVAILABLE", ABORTED)

    released = rollout(daemon, key_file, "release", "lane")
    assert (released.returncode, released.stderr) == (0, "")
    assert released.stdout.startswith("lane: shadow rollout of version 2 against version 1")
    assert "held" not in released.stdout
    assert in_rollout(daemon, "lane")

    promoted = rollout(daemon, key_file, "promote", "lane")
    assert (promoted.returncode, promoted.stderr) == (0, "")
    assert promoted.stdout.startswith("lane: version 2 promoted, watched until ")
    assert version_status(daemon, "lane", "2")[0] == "READY"

    audit = [
        line[line.index("Repository: ") :]
        for line in daemon.log().splitlines()
        if "Repository: " in line and "model=lane" in line
    ]
    assert audit == [
        "Repository: rollout abort api=http from=127.0.0.1 model=lane result=ok",
        "Repository: rollout release api=http from=127.0.0.1 model=lane result=ok",
        "Repository: rollout promote api=http from=127.0.0.1 model=lane result=ok",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("promote", "plain"), "model 'plain': no rollout in progress"),
        (("abort", "plain"), "model 'plain': no rollout in progress"),
        (("release", "plain"), "model 'plain': no version is held"),
        (("status", "nope"), "unknown model 'nope': no such model folder"),
    ],
)
def test_a_refusal_exits_1_with_the_daemons_message(daemon, key_file, args, message):
    result = rollout(daemon, key_file, *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"edgebox: {message}\n")


def test_without_the_key_the_refusal_says_how_to_send_one(daemon, key_file, road):
    result = run_edgebox("rollout", "status", road, "--url", daemon.url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "edgebox: This API is restricted, expecting header 'edgebox-api-key' (give the "
        "daemon's API key with --api-key-file, or a restricted API's header with "
        "--header NAME=VALUE)\n"
    )
    header = f"edgebox-api-key={API_KEY}"
    result = run_edgebox("rollout", "status", road, "--url", daemon.url, "--header", header)
    assert result.returncode == 0
    assert result.stdout.startswith("road: shadow rollout of version 2")


def test_no_daemon_listening_exits_69_saying_so():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_edgebox("rollout", "status", "--url", f"127.0.0.1:{port}")
    assert (result.returncode, result.stdout) == (69, "")
    assert result.stderr.startswith(
        f"edgebox: cannot reach the daemon at http://127.0.0.1:{port}: "
    )


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("promote",), "the following arguments are required: MODEL"),
        (("retry", "lane"), "argument ACTION: invalid choice: 'retry'"),
        (("status", "--url", "ftp://box"), "argument --url: expected an http:// or https:// URL"),
        (("status", "--timeout-s", "0"), "argument --timeout-s: expected a number of seconds"),
        (("abort", "models/lane"), "argument MODEL: model name 'models/lane': expected a single"),
        (("status", "--header", "a=b\nc: d"), "argument --header: expected NAME=VALUE on one line"),
    ],
)
def test_a_command_line_that_does_not_parse_exits_2(args, problem):
    result = run_edgebox("rollout", *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert problem in result.stderr


def test_an_api_key_file_others_can_read_is_refused_before_anything_is_sent(tmp_path):
    path = tmp_path / "api.key"
    path.write_text(API_KEY + "\n")
    os.chmod(path, 0o644)
    result = run_edgebox("rollout", "status", "--api-key-file", str(path))
    assert result.returncode == 2
    assert f"argument --api-key-file: '{path}' can be read by every user (mode 0644)" in (
        result.stderr
    )
