"""An infer whose outputs go to system shared memory, answered by the
reference Triton and by edgebox: the same JSON, outputs listed without data or
parameters (``triton_answers.SHARED_MEMORY_OUTPUTS_HTTP``), and the same bytes
in the region."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest

ARANGE = np.arange(16, dtype=np.float32).reshape(1, 16)


def post(url: str, path: str, document: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://{url}{path}", data=json.dumps(document).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        raw = reply.read()
        return reply.status, json.loads(raw) if raw else {}


@pytest.fixture
def region():
    """The key of a 128-byte POSIX shm object, and its path."""
    key = f"/edgebox-parity-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path = Path(f"/dev/shm{key}")
    path.write_bytes(bytes(128))
    try:
        yield key, path
    finally:
        path.unlink()


def answer(url: str, key: str) -> dict:
    name = f"out_{uuid.uuid4().hex[:8]}"
    post(url, f"/v2/systemsharedmemory/region/{name}/register", {"key": key, "byte_size": 128})
    try:
        place = {"shared_memory_region": name, "shared_memory_byte_size": 64}
        status, document = post(
            url,
            "/v2/models/add_sub_py/infer",
            {
                "inputs": [
                    {"name": n, "shape": [1, 16], "datatype": "FP32", "data": ARANGE.tolist()}
                    for n in ("INPUT0", "INPUT1")
                ],
                "outputs": [
                    {"name": "OUTPUT0", "parameters": place},
                    {"name": "OUTPUT1", "parameters": {**place, "shared_memory_offset": 64}},
                ],
            },
        )
    finally:
        post(url, f"/v2/systemsharedmemory/region/{name}/unregister", {})
    assert status == 200
    return document


def test_shared_memory_outputs_are_answered_as_triton_answers_them(triton, edgebox, region):
    key, path = region
    expected = (ARANGE * 2).tobytes() + np.zeros_like(ARANGE).tobytes()
    theirs = answer(triton, key)
    assert path.read_bytes() == expected
    path.write_bytes(bytes(128))
    ours = answer(edgebox, key)
    assert path.read_bytes() == expected
    assert ours == theirs
    assert theirs["outputs"] == [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16]},
        {"name": "OUTPUT1", "datatype": "FP32", "shape": [1, 16]},
    ]
