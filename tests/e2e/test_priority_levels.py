"""Request priorities through the real daemon: tritonclient's ``priority``
argument reaches the dynamic batcher over HTTP and gRPC (the batcher's order
is pinned in tests/scheduling/test_dynamic_batcher_priority.py), and a
priority that is no unsigned integer is the client's mistake, a 400."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from model_fixtures import PYTHON_XY_IDENTITY, write_model

PRIORITY_CONFIG = """
name: "urgent"
backend: "python"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching {
  priority_levels: 3
  default_priority_level: 2
  priority_queue_policy { key: 3 value: { max_queue_size: 4 } }
}
"""


@pytest.fixture(scope="module")
def repository(repository: Path) -> Path:
    write_model(repository, "urgent", PRIORITY_CONFIG, {"1/model.py": PYTHON_XY_IDENTITY})
    return repository


@pytest.mark.parametrize("priority", [0, 1, 3, 7])
def test_every_priority_is_served_over_http_and_grpc(daemon, priority: int) -> None:
    x = np.array([[priority, 1]], dtype=np.float32)
    with httpclient.InferenceServerClient(daemon.url) as client:
        inputs = [httpclient.InferInput("X", [1, 2], "FP32")]
        inputs[0].set_data_from_numpy(x)
        np.testing.assert_array_equal(
            client.infer("urgent", inputs, priority=priority).as_numpy("Y"), x
        )
    with grpcclient.InferenceServerClient(daemon.grpc_url) as client:
        inputs = [grpcclient.InferInput("X", [1, 2], "FP32")]
        inputs[0].set_data_from_numpy(x)
        np.testing.assert_array_equal(
            client.infer("urgent", inputs, priority=priority).as_numpy("Y"), x
        )


def test_a_priority_that_is_no_unsigned_integer_is_a_400(daemon) -> None:
    body = {
        "parameters": {"priority": "high"},
        "inputs": [{"name": "X", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}],
    }
    request = urllib.request.Request(
        f"http://{daemon.url}/v2/models/urgent/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert "parameter 'priority' must be an unsigned integer" in json.load(refused.value)["error"]
