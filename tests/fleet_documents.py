"""Desired-state documents for the fleet tests: a valid one to start from,
and its signed envelope."""

from __future__ import annotations

import hashlib

from edgebox.fleet.document import Artifact, Desired, Targets, WantedModel, document_bytes
from edgebox.fleet.signing import sign_envelope


def artifact_for(content: bytes, url: str = "http://127.0.0.1:9/a.tar.gz") -> Artifact:
    return Artifact(url, hashlib.sha256(content).hexdigest(), len(content))


def desired(
    generation: int = 1,
    group: str = "line-3",
    version: int = 2,
    targets: Targets | None = None,
    rollout: dict | None = None,
) -> Desired:
    wanted = WantedModel(
        "add_sub", version, artifact_for(b"v%d" % version), targets or Targets(all=True), rollout
    )
    return Desired(group, generation, "2026-11-28T05:00:00Z", {"add_sub": wanted})


def signed(document: Desired, private_key) -> bytes:
    return sign_envelope(document_bytes(document), private_key)
