"""Poll mode basics: a version dropped by atomic rename is served, a version
being copied is not loaded until its files stop changing, a removed model goes."""

from __future__ import annotations

import shutil

import numpy as np
import tritonclient.http as httpclient

from daemon_process import wait_for
from model_fixtures import add_add_sub, add_sub_infer_inputs
from scripts.onnx_builders import build_add_sub


def served_versions(client, model: str) -> list[str]:
    try:
        return client.get_model_metadata(model)["versions"]
    except Exception:
        return []


def infer_version(client, model: str) -> str:
    a = np.ones((1, 16), dtype=np.float32)
    inputs = add_sub_infer_inputs(httpclient, a, a)
    return client.infer(model, inputs).get_response()["model_version"]


def test_versions_follow_the_repository(tmp_path, start_daemon):
    repo = tmp_path / "repo"
    model_dir = add_add_sub(repo, "add_sub")
    daemon = start_daemon(repo, "--model-control-mode", "poll", "--repository-poll-secs", "0.2")
    client = httpclient.InferenceServerClient(daemon.url)
    assert infer_version(client, "add_sub") == "1"

    staging = model_dir / ".2.partial"
    build_add_sub(staging / "model.onnx")
    staging.rename(model_dir / "2")
    wait_for(lambda: served_versions(client, "add_sub") == ["2"], what="version 2 to serve")
    assert infer_version(client, "add_sub") == "2"

    whole = build_add_sub(tmp_path / "whole.onnx").read_bytes()
    (model_dir / "3").mkdir()
    with open(model_dir / "3" / "model.onnx", "wb") as partial:
        partial.write(whole[:100])
        partial.flush()
        wait_for(
            lambda: "model 'add_sub': version 3 still changing; waiting" in daemon.log(),
            what="the poller to see the copy",
        )
        partial.write(whole[100:])
    wait_for(lambda: served_versions(client, "add_sub") == ["3"], what="version 3 to serve")
    assert "model 'add_sub' version 3: UNAVAILABLE" not in daemon.log()

    shutil.rmtree(model_dir)
    wait_for(
        lambda: not client.is_model_ready("add_sub") if _known(client) else True,
        what="the model to go",
    )
    assert "model 'add_sub': folder removed from the repository" in daemon.log()
    client.close()


def _known(client) -> bool:
    return any(e["name"] == "add_sub" for e in client.get_model_repository_index())
