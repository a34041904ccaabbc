"""The current desired state of a group, read back from the broker, and the
next one: one model changed, every other model left exactly as it was.

The current document is checked before anything is built on it: signed by
the operator's own key, it must verify (a document under our key id that does
not verify was tampered with, and building on it would sign someone else's
models); signed by another key, it is taken with a warning, because keys
rotate and another operator may have published the last one.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edgebox.errors import EdgeboxError
from edgebox.fleet.document import Artifact, Desired, Targets, WantedModel, parse_document
from edgebox.fleet.signing import Refused, TrustedKeys, key_id


@dataclass(frozen=True)
class Current:
    desired: Desired | None
    """None: the group has no desired state yet."""
    warning: str = ""


def read_current(payload: bytes | None, group: str, private_key: Ed25519PrivateKey) -> Current:
    """The group's current document from the retained ``payload``;
    EdgeboxError when it cannot be built upon."""
    if payload is None:
        return Current(None)
    own = TrustedKeys([private_key.public_key()])
    warning = ""
    try:
        data, _ = own.open(payload)
    except Refused as refusal:
        if refusal.kind != "key":
            raise EdgeboxError(
                f"the group's current desired state was refused: {refusal.reason}; "
                "it was not signed by this key as published (tampered?), so nothing is built "
                "on it"
            ) from None
        data = _unverified_document(payload)
        warning = (
            f"the current desired state is signed by key '{refusal.key_id}', not by this "
            f"key '{key_id(private_key.public_key())}' (a rotation?); continuing from it"
        )
    try:
        desired = parse_document(data)
    except Refused as refusal:
        raise EdgeboxError(f"the group's current desired state: {refusal.reason}") from None
    if desired.group != group:
        raise EdgeboxError(
            f"the desired state on group '{group}''s topic names group '{desired.group}'"
        )
    return Current(desired, warning)


def _unverified_document(payload: bytes) -> bytes:
    """The document bytes of an envelope whose signer this operator does not
    hold (``TrustedKeys.open`` checked the envelope's shape already)."""
    try:
        return base64.b64decode(json.loads(payload)["document"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise EdgeboxError(f"the group's current desired state is unreadable: {exc}") from None


def next_generation(current: Desired | None, clock: Callable[[], float] = time.time) -> int:
    """Above the current one, and the wall clock's seconds where that is
    higher: two operators starting from the same document a second apart
    still publish different generations."""
    previous = current.generation if current is not None else 0
    return max(previous + 1, int(clock()))


def deploy_model(
    current: Desired | None,
    group: str,
    model: str,
    version: int,
    artifact: Artifact,
    rollout: dict | None,
) -> WantedModel:
    """The model's entry for a deploy, ``previous`` pointing at what the
    group ran before. The current entry's own ``previous`` is kept when the
    version does not change (a redeploy must not lose the way back) and when
    the current entry does not target every device (a deploy that halted:
    most devices still run its ``previous``)."""
    before = current.models.get(model) if current is not None else None
    previous = None
    if before is not None:
        if before.version == version or not before.targets.all:
            previous = before.previous
        else:
            previous = (before.version, before.artifact)
    return WantedModel(model, version, artifact, Targets(all=True), rollout, previous)


def rollback_model(current: Desired | None, model: str, rollout: dict | None) -> WantedModel:
    """The model's entry going back to its ``previous``, targeting every
    device; the version left becomes the new ``previous``, so a rollback can
    itself be undone. EdgeboxError when there is nothing to go back to."""
    before = current.models.get(model) if current is not None else None
    if before is None:
        raise EdgeboxError(f"model '{model}': the group's desired state does not name it")
    if before.previous is None:
        raise EdgeboxError(
            f"model '{model}': version {before.version} has no previous version to roll back "
            "to (it was the first one deployed)"
        )
    version, artifact = before.previous
    return WantedModel(
        model, version, artifact, Targets(all=True), rollout, (before.version, before.artifact)
    )


def document_with(
    current: Desired | None,
    group: str,
    wanted: WantedModel,
    targets: Targets,
    generation: int,
    clock: Callable[[], float] = time.time,
) -> Desired:
    models = dict(current.models) if current is not None else {}
    models[wanted.name] = replace(wanted, targets=targets)
    issued_at = datetime.fromtimestamp(clock(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Desired(group, generation, issued_at, models)
