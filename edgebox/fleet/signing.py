"""Ed25519 keys and the signed envelope a desired state travels in.

The broker is shared infrastructure: anyone who may publish on the group's
topic could otherwise tell a hundred devices what to run. So a device takes
a desired state only from an envelope whose signature verifies against one of
its ``trusted_keys``; the broker's ACLs are a second fence, not the first.

The signature covers the document's bytes exactly as carried (base64 in the
envelope), never a re-serialisation, so no two JSON encoders can disagree
about what was signed. A key is named by ``key_id`` (16 hex of the SHA-256 of
its raw 32 bytes), which lets a device say which key signed a refused
document, and an operator rotate keys: trust the new public key everywhere,
sign with it, then drop the old one (docs/fleet.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from edgebox.errors import EdgeboxError, InvalidArgument

MAX_ENVELOPE_BYTES = 400 * 1024
"""A 256 KiB document in base64 and its signature fit; anything larger is
refused before it is parsed."""


class Refused(EdgeboxError):
    """A desired state the device will not apply; ``kind`` says which check
    refused it (``signature``, ``key``, ``group``, ``generation``,
    ``malformed``, ``artifact``), ``reason`` says why in words."""

    def __init__(self, reason: str, kind: str = "malformed", key_id: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.key_id = key_id


def generate_key(private_path: Path) -> Path:
    """A new key pair: the private key (PEM, PKCS#8) at ``private_path``,
    created mode 0600 and never overwritten, and the public key beside it
    as ``<private_path>.pub``; returns the public key's path."""
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_path = private_path.with_name(private_path.name + ".pub")
    if public_path.exists():
        raise InvalidArgument(f"'{public_path}' exists; choose another name for the key")
    try:
        descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidArgument(f"'{private_path}' exists; a key is never overwritten") from None
    with os.fdopen(descriptor, "wb") as file:
        file.write(private_pem)
    public_path.write_bytes(public_pem(key.public_key()))
    return public_path


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise InvalidArgument(f"private key '{path}': {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"private key '{path}': not a PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidArgument(f"private key '{path}': not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except OSError as exc:
        raise InvalidArgument(f"public key '{path}': {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"public key '{path}': not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidArgument(f"public key '{path}': not an Ed25519 key")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign_envelope(document_bytes: bytes, private_key: Ed25519PrivateKey) -> bytes:
    """The MQTT payload carrying ``document_bytes`` signed by ``private_key``."""
    envelope = {
        "document": base64.b64encode(document_bytes).decode("ascii"),
        "key_id": key_id(private_key.public_key()),
        "signature": base64.b64encode(private_key.sign(document_bytes)).decode("ascii"),
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("ascii")


class TrustedKeys:
    """The public keys a device takes desired states from."""

    def __init__(self, public_keys: Iterable[Ed25519PublicKey]) -> None:
        self._keys = {key_id(key): key for key in public_keys}

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> TrustedKeys:
        return cls(load_public_key(path) for path in paths)

    @property
    def ids(self) -> list[str]:
        return sorted(self._keys)

    def open(self, payload: bytes) -> tuple[bytes, str]:
        """The document bytes inside ``payload`` and the id of the trusted key
        that signed them; Refused, with the check that failed, otherwise."""
        if len(payload) > MAX_ENVELOPE_BYTES:
            raise Refused(f"envelope of {len(payload)} bytes exceeds {MAX_ENVELOPE_BYTES}")
        try:
            envelope = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise Refused(f"envelope is not JSON: {exc}") from None
        if not isinstance(envelope, dict) or set(envelope) != {"document", "key_id", "signature"}:
            raise Refused("envelope must be an object with exactly document, key_id, signature")
        signer = envelope["key_id"]
        if not isinstance(signer, str):
            raise Refused("envelope key_id must be a string")
        document = _base64(envelope["document"], "document", signer)
        signature = _base64(envelope["signature"], "signature", signer)
        key = self._keys.get(signer)
        if key is None:
            raise Refused(
                f"signed with key '{signer[:16]}', which this device does not trust",
                "key",
                signer[:16],
            )
        try:
            key.verify(signature, document)
        except InvalidSignature:
            raise Refused(
                f"signature does not verify with key '{signer}'", "signature", signer
            ) from None
        return document, signer


def _base64(value: object, field: str, signer: object) -> bytes:
    if not isinstance(value, str):
        raise Refused(f"envelope {field} must be base64 text")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise Refused(f"envelope {field} is not valid base64") from None
