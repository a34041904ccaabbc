"""Loads and unloads over HTTP and gRPC leave one journal line each: what,
through which API, from which address, and how it ended (issue 19)."""

from __future__ import annotations

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from daemon_process import explicit_control


def test_loads_and_unloads_name_the_api_the_address_and_the_outcome(
    add_sub_repository, start_daemon
):
    daemon = start_daemon(add_sub_repository, *explicit_control())
    http = httpclient.InferenceServerClient(daemon.url.removeprefix("http://"))
    grpc = grpcclient.InferenceServerClient(daemon.grpc_url)

    http.load_model("add_sub")
    grpc.unload_model("add_sub")
    grpc.load_model("add_sub")
    http.unload_model("add_sub")
    with pytest.raises(InferenceServerException):
        http.load_model("no\nsuch model")
    with pytest.raises(InferenceServerException):
        grpc.load_model("missing")
    http.close()
    grpc.close()
    daemon.stop()

    lines = [line for line in daemon.log().splitlines() if "Repository: " in line]
    assert [line[line.index("Repository: ") :] for line in lines[:4]] == [
        "Repository: load api=http from=127.0.0.1 model=add_sub result=ok",
        "Repository: unload api=grpc from=127.0.0.1 model=add_sub result=ok",
        "Repository: load api=grpc from=127.0.0.1 model=add_sub result=ok",
        "Repository: unload api=http from=127.0.0.1 model=add_sub result=ok",
    ]
    assert 'load api=http from=127.0.0.1 model="no\\nsuch model" result=failed error=' in lines[4]
    assert "load api=grpc from=127.0.0.1 model=missing result=failed error=" in lines[5]
    assert len(lines) == 6
