"""unpack: only plain files and folders come out, each refusal names its member."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.fleet.artifacts import ArtifactRejected, pack, unpack


def hostile_archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A tar.gz written member by member, with whatever headers the test wants."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def regular(name: str, data: bytes = b"ok", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


def refusal(tmp_path: Path, members, **caps) -> str:
    archive = hostile_archive(tmp_path / "hostile.tar.gz", members)
    with pytest.raises(ArtifactRejected) as refused:
        unpack(archive, tmp_path / "out", **caps)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["hostile.tar.gz"], "no staging left behind"
    return str(refused.value)


def test_packed_folder_unpacks_to_the_same_files(tmp_path):
    source = tmp_path / "src"
    (source / "assets" / "empty").mkdir(parents=True)
    (source / "model.onnx").write_bytes(os.urandom(300_000))
    (source / "assets" / "labels.txt").write_text("car\n")
    (source / "tool").write_text("#!/bin/sh\n")
    os.chmod(source / "tool", 0o750)
    packed = pack(source, tmp_path / "a.tar.gz")

    unpack(packed.path, tmp_path / "out")

    out = tmp_path / "out"
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert found == ["assets", "assets/empty", "assets/labels.txt", "model.onnx", "tool"]
    assert (out / "model.onnx").read_bytes() == (source / "model.onnx").read_bytes()
    assert stat.S_IMODE((out / "tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "model.onnx").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / "assets").stat().st_mode) == 0o755
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def test_absolute_path_is_refused(tmp_path):
    message = refusal(tmp_path, [regular("ok.txt"), regular("/etc/cron.d/evil")])
    assert message == (
        "artifact 'hostile.tar.gz': member '/etc/cron.d/evil': absolute paths are not allowed"
    )


def test_dot_dot_is_refused(tmp_path):
    message = refusal(tmp_path, [regular("a/../../escape.txt")])
    assert message == (
        "artifact 'hostile.tar.gz': member 'a/../../escape.txt': '..' is not allowed in a path"
    )


def test_symlink_is_refused(tmp_path):
    message = refusal(tmp_path, [special("model.onnx", tarfile.SYMTYPE, "/etc/passwd")])
    assert message == (
        "artifact 'hostile.tar.gz': member 'model.onnx': "
        "is a symlink (to '/etc/passwd'); links are not allowed"
    )


def test_hard_link_is_refused(tmp_path):
    message = refusal(tmp_path, [regular("a"), special("b", tarfile.LNKTYPE, "a")])
    assert message == (
        "artifact 'hostile.tar.gz': member 'b': is a hard link (to 'a'); links are not allowed"
    )


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_device_is_refused(tmp_path, kind):
    message = refusal(tmp_path, [special("dev/sda", kind)])
    assert message == (
        "artifact 'hostile.tar.gz': member 'dev/sda': "
        "is a device; only regular files and folders are allowed"
    )


def test_fifo_is_refused(tmp_path):
    message = refusal(tmp_path, [special("pipe", tarfile.FIFOTYPE)])
    assert message == (
        "artifact 'hostile.tar.gz': member 'pipe': "
        "is a fifo; only regular files and folders are allowed"
    )


@pytest.mark.parametrize(
    ("mode", "label"), [(0o4755, "setuid"), (0o2755, "setgid"), (0o1755, "sticky")]
)
def test_setuid_setgid_sticky_bits_are_refused(tmp_path, mode, label):
    message = refusal(tmp_path, [regular("tool", mode=mode)])
    assert message == f"artifact 'hostile.tar.gz': member 'tool': has the {label} bit; not allowed"


def test_control_characters_in_a_name_are_refused_and_escaped(tmp_path):
    message = refusal(tmp_path, [regular("evil\x1b[2Jname")])
    assert message == (
        "artifact 'hostile.tar.gz': member 'evil\\x1b[2Jname': "
        "the name is empty or holds control characters"
    )


def test_too_many_bytes_is_refused_at_the_member_that_crosses_the_cap(tmp_path):
    message = refusal(
        tmp_path, [regular("a", b"x" * 600), regular("b", b"y" * 500)], max_bytes=1000
    )
    assert message == (
        "artifact 'hostile.tar.gz': member 'b': brings the unpacked size to 1100 bytes, "
        "over the cap of 1000 bytes"
    )


def test_too_many_members_is_refused(tmp_path):
    message = refusal(tmp_path, [regular(f"f{i}") for i in range(4)], max_members=3)
    assert message == "artifact 'hostile.tar.gz': member 'f3': more than 3 members"


def test_a_small_gzip_that_inflates_past_the_cap_stops_at_the_cap(tmp_path):
    archive = tmp_path / "bomb.tar.gz"
    # A PAX comment of 8 MiB of zeros: not a member's contents, so only the
    # stream cap can catch it.
    info = tarfile.TarInfo("small")
    info.pax_headers = {"comment": "0" * (8 << 20)}
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b""))
    assert archive.stat().st_size < 64 * 1024

    with pytest.raises(ArtifactRejected) as refused:
        unpack(archive, tmp_path / "out", max_bytes=1024, max_members=2)
    assert str(refused.value) == (
        f"artifact 'bomb.tar.gz': decompresses to more than {1024 + 2 * 16 * 1024 + 1024 * 1024} bytes; "
        "refused before reading on"
    )
    assert not (tmp_path / "out").exists()


def test_duplicate_member_is_refused(tmp_path):
    message = refusal(tmp_path, [regular("a"), regular("a", b"second")])
    assert message == "artifact 'hostile.tar.gz': member 'a': appears twice in the archive"


def test_existing_target_is_not_touched(tmp_path):
    archive = hostile_archive(tmp_path / "good.tar.gz", [regular("a")])
    (tmp_path / "out").mkdir()
    with pytest.raises(EdgeboxError) as refused:
        unpack(archive, tmp_path / "out")
    assert refused.value.code == ErrorCode.ALREADY_EXISTS
    assert str(refused.value) == (
        f"artifact 'good.tar.gz': cannot unpack into '{tmp_path / 'out'}': it exists already"
    )
    assert list((tmp_path / "out").iterdir()) == []


def test_not_a_tar_gz_is_refused(tmp_path):
    (tmp_path / "junk.tar.gz").write_bytes(gzip.compress(b"not a tar at all" * 100))
    with pytest.raises(
        ArtifactRejected, match=r"^artifact 'junk\.tar\.gz': not a readable tar\.gz"
    ):
        unpack(tmp_path / "junk.tar.gz", tmp_path / "out")
    (tmp_path / "plain").write_bytes(b"plain bytes")
    with pytest.raises(ArtifactRejected, match=r"^artifact 'plain': not a readable tar\.gz"):
        unpack(tmp_path / "plain", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_modes_are_normalised_whatever_the_archive_says(tmp_path):
    archive = hostile_archive(
        tmp_path / "modes.tar.gz",
        [regular("private", mode=0o600), regular("writable_tool", mode=0o777)],
    )
    unpack(archive, tmp_path / "out")
    assert stat.S_IMODE((tmp_path / "out" / "private").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out" / "writable_tool").stat().st_mode) == 0o755
