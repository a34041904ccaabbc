"""Fixtures shared by the transport tests: real POSIX shm objects."""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture
def shm_key():
    """A factory of shm objects of a given size; returns tritonclient-style
    keys ('/name') and removes the objects afterwards."""
    made: list[str] = []

    def make(size: int, fill: bytes = b"") -> str:
        name = f"edgebox-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path = f"/dev/shm/{name}"
        with open(path, "wb") as handle:
            handle.truncate(size)
            handle.write(fill)
        made.append(path)
        return "/" + name

    yield make
    for path in made:
        if os.path.exists(path):
            os.unlink(path)
