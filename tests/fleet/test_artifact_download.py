"""download: resumable, size-capped, sha256-checked, against a real HTTP(S) server."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from artifact_server import ArtifactServer, SeenRequest, self_signed_certificate

from edgebox.fleet.artifacts import ArtifactRejected, ArtifactUnavailable, download
from edgebox.fleet.document import Artifact

CAP = 10 * 1024 * 1024


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    payload = os.urandom(300_000)
    (root / "lane-7.tar.gz").write_bytes(payload)
    with ArtifactServer(root) as server:
        yield server, payload


def wanted(server: ArtifactServer, name: str, payload: bytes, **changes) -> Artifact:
    fields = {
        "url": server.url(name),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
    }
    fields.update(changes)
    return Artifact(**fields)


def test_download_verifies_and_renames_to_the_sha256(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    phases = []

    got = download(artifact, tmp_path / "dl", CAP, None, progress=phases.append)

    assert got.path == tmp_path / "dl" / f"{artifact.sha256}.tar.gz"
    assert got.path.read_bytes() == payload
    assert (got.fetched_bytes, got.resumed_from, got.reused) == (len(payload), 0, False)
    assert phases == ["downloading", "verifying"]
    assert stat.S_IMODE((tmp_path / "dl").stat().st_mode) == 0o700
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [got.path.name]
    assert server.requests("lane-7.tar.gz") == [SeenRequest(None, 200)]


def test_cut_download_resumes_with_a_range_request(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    server.cut_next("lane-7.tar.gz", 100_000)

    with pytest.raises(ArtifactUnavailable) as broken:
        download(artifact, tmp_path / "dl", CAP, None)
    assert str(broken.value) == (
        f"artifact '{artifact.url}': the response ended after 100000 of 300000 bytes; "
        "the next try resumes"
    )
    assert (tmp_path / "dl" / f"{artifact.sha256}.part").stat().st_size == 100_000

    got = download(artifact, tmp_path / "dl", CAP, None)

    assert got.path.read_bytes() == payload
    assert (got.fetched_bytes, got.resumed_from) == (200_000, 100_000)
    assert server.requests("lane-7.tar.gz") == [
        SeenRequest(None, 200),
        SeenRequest("bytes=100000-", 206),
    ]
    assert server.bytes_sent("lane-7.tar.gz") == len(payload)


def test_a_server_ignoring_range_restarts_the_file(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    part = tmp_path / "dl" / f"{artifact.sha256}.part"
    part.parent.mkdir()
    part.write_bytes(b"garbage that is not a prefix")
    server.ignore_range("lane-7.tar.gz")

    got = download(artifact, tmp_path / "dl", CAP, None)

    assert got.path.read_bytes() == payload
    assert (got.fetched_bytes, got.resumed_from) == (len(payload), 0)
    assert server.requests("lane-7.tar.gz") == [SeenRequest("bytes=28-", 200)]


def test_declared_size_over_the_cap_is_refused_before_connecting(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)

    with pytest.raises(ArtifactRejected) as refused:
        download(artifact, tmp_path / "dl", len(payload) - 1, None)

    assert str(refused.value) == (
        f"artifact '{artifact.url}': declared size {len(payload)} bytes is over the cap "
        f"of {len(payload) - 1} bytes"
    )
    assert server.requests("lane-7.tar.gz") == []


def test_content_length_over_the_declared_size_is_refused_before_reading(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload[:1000], size=1000)

    with pytest.raises(ArtifactRejected) as refused:
        download(artifact, tmp_path / "dl", CAP, None)

    assert str(refused.value) == (
        f"artifact '{artifact.url}': Content-Length 300000 is more than the 1000 bytes "
        "expected (declared size 1000, 0 already here)"
    )
    assert not (tmp_path / "dl" / f"{artifact.sha256}.part").exists()


def test_a_server_streaming_more_than_declared_is_cut_off(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload[:1000], size=1000)
    server.omit_length("lane-7.tar.gz")

    with pytest.raises(ArtifactRejected) as refused:
        download(artifact, tmp_path / "dl", CAP, None)

    assert str(refused.value) == (
        f"artifact '{artifact.url}': the server sent more than the declared 1000 bytes"
    )
    assert list((tmp_path / "dl").iterdir()) == []


def test_sha256_mismatch_deletes_the_part_and_says_both_digests(store, tmp_path):
    server, payload = store
    expected = hashlib.sha256(b"what the document signed").hexdigest()
    artifact = wanted(server, "lane-7.tar.gz", payload, sha256=expected)

    with pytest.raises(ArtifactRejected) as refused:
        download(artifact, tmp_path / "dl", CAP, None)

    got = hashlib.sha256(payload).hexdigest()
    assert str(refused.value) == (
        f"artifact '{artifact.url}': sha256 mismatch: expected {expected}, got {got}"
    )
    assert list((tmp_path / "dl").iterdir()) == []


def test_a_verified_file_is_reused_without_a_request(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    download(artifact, tmp_path / "dl", CAP, None)

    again = download(artifact, tmp_path / "dl", CAP, None)

    assert (again.reused, again.fetched_bytes) == (True, 0)
    assert len(server.requests("lane-7.tar.gz")) == 1


def test_a_tampered_kept_file_is_fetched_again(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    first = download(artifact, tmp_path / "dl", CAP, None)
    first.path.write_bytes(b"x" * len(payload))

    again = download(artifact, tmp_path / "dl", CAP, None)

    assert again.reused is False
    assert again.path.read_bytes() == payload
    assert len(server.requests("lane-7.tar.gz")) == 2


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"url": "file:///etc/passwd"}, "expected an http:// or https:// URL"),
        ({"sha256": "../../etc/" + "0" * 54}, "is not 64 lowercase hex"),
        ({"size": 0}, "size 0 is not a positive integer"),
    ],
)
def test_a_malformed_artifact_is_refused_before_connecting(store, tmp_path, changes, reason):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload, **changes)
    with pytest.raises(ArtifactRejected, match=reason):
        download(artifact, tmp_path / "dl", CAP, None)
    assert server.requests("lane-7.tar.gz") == []


def test_missing_file_on_the_server_is_unavailable_and_keeps_nothing(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "gone.tar.gz", payload)
    with pytest.raises(ArtifactUnavailable) as failed:
        download(artifact, tmp_path / "dl", CAP, None)
    assert str(failed.value) == f"artifact '{artifact.url}': HTTP 404 Not Found"


def test_redirect_to_another_scheme_is_refused(store, tmp_path):
    server, payload = store
    server.redirect("moved.tar.gz", "ftp://127.0.0.1/lane-7.tar.gz")
    artifact = wanted(server, "moved.tar.gz", payload)
    with pytest.raises(ArtifactRejected, match="another scheme; refused"):
        download(artifact, tmp_path / "dl", CAP, None)


def test_redirect_within_the_scheme_is_followed(store, tmp_path):
    server, payload = store
    server.redirect("moved.tar.gz", "/lane-7.tar.gz")
    got = download(wanted(server, "moved.tar.gz", payload), tmp_path / "dl", CAP, None)
    assert got.path.read_bytes() == payload


@pytest.fixture
def tls_store(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    payload = os.urandom(50_000)
    (root / "lane-7.tar.gz").write_bytes(payload)
    tls = self_signed_certificate(tmp_path / "tls")
    with ArtifactServer(root, tls=tls) as server:
        yield server, payload, tls.certificate


def test_https_with_the_ca_file_downloads(tls_store, tmp_path):
    server, payload, ca_file = tls_store
    artifact = wanted(server, "lane-7.tar.gz", payload)
    assert artifact.url.startswith("https://127.0.0.1:")

    got = download(artifact, tmp_path / "dl", CAP, ca_file)

    assert got.path.read_bytes() == payload


def test_https_without_the_ca_file_fails_verification(tls_store, tmp_path):
    server, payload, _ = tls_store
    artifact = wanted(server, "lane-7.tar.gz", payload)

    with pytest.raises(ArtifactUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        download(artifact, tmp_path / "dl", CAP, None)
    assert server.bytes_sent("lane-7.tar.gz") == 0


def test_an_unreadable_ca_file_is_named(tls_store, tmp_path):
    server, payload, _ = tls_store
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(Exception, match=f"ca_file '{missing}': cannot load it"):
        download(wanted(server, "lane-7.tar.gz", payload), tmp_path / "dl", CAP, missing)


def test_download_dir_path_is_the_only_place_written(store, tmp_path):
    server, payload = store
    before = set(Path(tmp_path).rglob("*"))
    got = download(wanted(server, "lane-7.tar.gz", payload), tmp_path / "dl", CAP, None)
    after = set(Path(tmp_path).rglob("*"))
    assert after - before == {tmp_path / "dl", got.path}


def test_past_the_deadline_the_bytes_are_kept_for_the_next_try(store, tmp_path):
    server, payload = store
    artifact = wanted(server, "lane-7.tar.gz", payload)

    with pytest.raises(ArtifactUnavailable) as late:
        download(artifact, tmp_path / "dl", CAP, None, deadline_s=0)

    assert str(late.value) == (
        f"artifact '{artifact.url}': past the download deadline; "
        f"0 of {len(payload)} bytes kept for the next try"
    )
    assert (tmp_path / "dl" / f"{artifact.sha256}.part").exists()
    assert download(artifact, tmp_path / "dl", CAP, None).path.read_bytes() == payload
