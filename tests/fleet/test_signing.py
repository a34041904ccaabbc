"""Only an envelope whose signature verifies against a trusted key yields a
document; every other envelope is refused with the check that failed, and
key files are written as an operator expects (private 0600, never
overwritten)."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from edgebox.errors import InvalidArgument
from edgebox.fleet.signing import (
    Refused,
    TrustedKeys,
    generate_key,
    key_id,
    load_private_key,
    load_public_key,
    sign_envelope,
)


def test_generate_key_writes_a_private_key_only_its_owner_reads_and_the_public_key_beside(
    tmp_path: Path,
) -> None:
    public = generate_key(tmp_path / "fleet.key")
    assert public == tmp_path / "fleet.key.pub"
    assert stat.S_IMODE((tmp_path / "fleet.key").stat().st_mode) == 0o600
    private = load_private_key(tmp_path / "fleet.key")
    assert key_id(load_public_key(public)) == key_id(private.public_key())


def test_generate_key_never_overwrites_a_key(tmp_path: Path) -> None:
    generate_key(tmp_path / "fleet.key")
    before = (tmp_path / "fleet.key").read_bytes()
    (tmp_path / "fleet.key.pub").unlink()
    with pytest.raises(InvalidArgument, match="never overwritten"):
        generate_key(tmp_path / "fleet.key")
    assert (tmp_path / "fleet.key").read_bytes() == before


def test_a_file_that_is_no_public_key_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.pub").write_text("hello\n")
    with pytest.raises(InvalidArgument, match=r"bad\.pub"):
        load_public_key(tmp_path / "bad.pub")


def test_a_trusted_signature_opens_the_envelope() -> None:
    key = Ed25519PrivateKey.generate()
    payload = sign_envelope(b'{"x":1}', key)
    document, signer = TrustedKeys([key.public_key()]).open(payload)
    assert document == b'{"x":1}'
    assert signer == key_id(key.public_key())


def test_an_untrusted_key_is_refused_as_such() -> None:
    trusted, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    with pytest.raises(Refused) as refused:
        TrustedKeys([trusted.public_key()]).open(sign_envelope(b"{}", other))
    assert refused.value.kind == "key"
    assert refused.value.key_id == key_id(other.public_key())


def test_a_document_changed_after_signing_is_refused() -> None:
    key = Ed25519PrivateKey.generate()
    envelope = json.loads(sign_envelope(b'{"generation":1}', key))
    envelope["document"] = base64.b64encode(b'{"generation":9}').decode()
    with pytest.raises(Refused) as refused:
        TrustedKeys([key.public_key()]).open(json.dumps(envelope).encode())
    assert refused.value.kind == "signature"


def test_a_signature_claiming_a_trusted_key_id_but_made_by_another_is_refused() -> None:
    trusted, forger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    envelope = json.loads(sign_envelope(b"{}", forger))
    envelope["key_id"] = key_id(trusted.public_key())
    with pytest.raises(Refused) as refused:
        TrustedKeys([trusted.public_key()]).open(json.dumps(envelope).encode())
    assert refused.value.kind == "signature"


@pytest.mark.parametrize(
    "payload, why",
    [
        (b"not json", "not JSON"),
        (b"[]", "exactly document, key_id, signature"),
        (b'{"document": "", "key_id": "a", "signature": "", "extra": 1}', "exactly"),
        (b'{"document": "%%%", "key_id": "a", "signature": ""}', "not valid base64"),
        (b'{"document": 1, "key_id": "a", "signature": ""}', "base64 text"),
        (b"x" * 500_000, "exceeds"),
    ],
)
def test_a_malformed_envelope_is_refused_with_the_reason(payload: bytes, why: str) -> None:
    with pytest.raises(Refused, match=why) as refused:
        TrustedKeys([Ed25519PrivateKey.generate().public_key()]).open(payload)
    assert refused.value.kind == "malformed"
