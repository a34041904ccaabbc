"""pack: a version folder becomes the same tar.gz bytes every time."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tarfile
from pathlib import Path

import pytest

from edgebox.errors import InvalidArgument
from edgebox.fleet.artifacts import pack


def version_folder(root: Path) -> Path:
    folder = root / "7"
    (folder / "assets" / "empty").mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"\x08\x07onnx-bytes" * 100)
    (folder / "model.py").write_text("print('not run')\n")
    (folder / "assets" / "labels.txt").write_text("car\nlane\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(folder / "run.sh", 0o700)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "model.cpython-310.pyc").write_bytes(b"cache")
    (folder / "stale.pyc").write_bytes(b"cache")
    return folder


def test_same_folder_packs_to_identical_bytes(tmp_path):
    folder = version_folder(tmp_path)
    first = pack(folder, tmp_path / "a.tar.gz")
    os.utime(folder / "model.onnx", (1_000_000, 1_000_000))
    os.chmod(folder / "model.py", 0o600)
    copy = shutil.copytree(folder, tmp_path / "elsewhere" / "7")
    second = pack(copy, tmp_path / "b.tar.gz")

    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()
    assert first.size == first.path.stat().st_size


def test_archive_holds_the_folder_contents_normalised(tmp_path):
    folder = version_folder(tmp_path)
    packed = pack(folder, tmp_path / "out.tar.gz")

    with tarfile.open(packed.path) as tar:
        members = tar.getmembers()
        contents = {m.name: tar.extractfile(m).read() for m in members if m.isfile()}
    assert [m.name for m in members] == [
        "assets",
        "assets/empty",
        "assets/labels.txt",
        "model.onnx",
        "model.py",
        "run.sh",
    ]
    assert contents["model.onnx"] == (folder / "model.onnx").read_bytes()
    assert contents["assets/labels.txt"] == b"car\nlane\n"
    assert {(m.name, m.mode) for m in members if m.isfile()} == {
        ("assets/labels.txt", 0o644),
        ("model.onnx", 0o644),
        ("model.py", 0o644),
        ("run.sh", 0o755),
    }
    assert all(m.mode == 0o755 for m in members if m.isdir())
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    header = packed.path.read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0", "the gzip header carries no time stamp"


def test_symlink_in_the_folder_is_refused_with_its_path(tmp_path):
    folder = version_folder(tmp_path)
    (folder / "assets" / "secrets").symlink_to("/etc/shadow")

    with pytest.raises(InvalidArgument) as refused:
        pack(folder, tmp_path / "out.tar.gz")
    assert str(refused.value) == (
        f"version folder '{folder}': 'assets/secrets' is a symlink; "
        "an artifact holds regular files and folders only"
    )
    assert not (tmp_path / "out.tar.gz").exists()


def test_fifo_and_socket_are_refused(tmp_path):
    folder = version_folder(tmp_path)
    os.mkfifo(folder / "pipe")
    with pytest.raises(InvalidArgument, match="'pipe' is a fifo"):
        pack(folder, tmp_path / "out.tar.gz")
    (folder / "pipe").unlink()
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(folder / "sock"))
        with pytest.raises(InvalidArgument, match="'sock' is a socket"):
            pack(folder, tmp_path / "out.tar.gz")
    finally:
        listener.close()


def test_empty_folder_and_output_inside_it_are_refused(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(InvalidArgument, match="holds no files to pack"):
        pack(tmp_path / "empty", tmp_path / "out.tar.gz")
    folder = version_folder(tmp_path)
    with pytest.raises(InvalidArgument, match="inside the version folder"):
        pack(folder, folder / "self.tar.gz")
