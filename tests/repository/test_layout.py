"""Scanning the repository folder: which entries are models, which are version
folders, and the fingerprints the poller compares.

Triton's rule: a version folder is named with a positive integer without a
leading zero; anything else in a model folder is ignored, as are hidden entries,
folders still being copied (``.tmp``/``.partial``) and stray files.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from edgebox.repository.layout import scan_model, scan_repository
from edgebox.repository.names import version_number

HOUR_AGO_NS = time.time_ns() - 3600 * 1_000_000_000


def touch(path: Path, content: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("1", 1),
        ("7", 7),
        ("10", 10),
        ("20240131", 20240131),
        ("0", None),
        ("01", None),
        ("007", None),
        ("-1", None),
        ("+1", None),
        ("1.5", None),
        ("v1", None),
        ("1a", None),
        (" 1", None),
        ("", None),
        ("\u00b2", None),
        ("\u0661", None),
    ],
)
def test_version_number_is_a_positive_integer_without_leading_zero(
    name: str, number: int | None
) -> None:
    assert version_number(name) == number


def test_only_version_folders_are_versions(tmp_path: Path) -> None:
    model = tmp_path / "m"
    touch(model / "config.pbtxt", b'platform: "onnxruntime_onnx"\n')
    for name in (
        "1",
        "2",
        "10",
        "0",
        "01",
        "v3",
        "1.5",
        ".4",
        "5.tmp",
        "6.partial",
        "\u00b2",
        "\u0661",
    ):
        touch(model / name / "model.onnx")
    touch(model / "7")  # a file named like a version
    touch(model / "labels.txt")

    folder = scan_model(model)

    assert list(folder.versions) == [1, 2, 10]
    assert folder.versions[2].path == model / "2"
    assert folder.versions[2].number == 2


def test_hidden_partial_and_stray_entries_are_not_models(tmp_path: Path) -> None:
    for name in ("add_sub", "lane", ".git", ".staging", "densenet.tmp", "yolo.partial"):
        touch(tmp_path / name / "config.pbtxt")
    touch(tmp_path / "README.md")
    touch(tmp_path / ".DS_Store")

    snapshot = scan_repository(tmp_path)

    assert snapshot.root == tmp_path
    assert list(snapshot.models) == ["add_sub", "lane"]
    assert snapshot.models["lane"].path == tmp_path / "lane"


def test_model_folder_without_versions_or_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    folder = scan_repository(tmp_path).models["empty"]
    assert folder.versions == {}
    assert folder.config_fingerprint == ()


def test_missing_repository_reads_as_empty(tmp_path: Path) -> None:
    snapshot = scan_repository(tmp_path / "nowhere")
    assert snapshot.models == {}


def test_fingerprint_holds_size_and_times_of_every_file(tmp_path: Path) -> None:
    version = tmp_path / "m" / "1"
    model_file = touch(version / "model.onnx", b"12345")
    touch(version / "sub" / "weights.bin", b"ab")
    # An old mtime (as cp -a leaves it) makes the folder's ctime differ from it.
    os.utime(version, ns=(HOUR_AGO_NS, HOUR_AGO_NS))

    fingerprint = scan_model(tmp_path / "m").versions[1].fingerprint

    own = os.stat(version)
    assert own.st_ctime_ns != own.st_mtime_ns
    model_stat = os.stat(model_file)
    weights_stat = os.stat(version / "sub" / "weights.bin")
    assert fingerprint == (
        (".", 0, own.st_mtime_ns, own.st_mtime_ns),
        ("model.onnx", 5, model_stat.st_mtime_ns, model_stat.st_ctime_ns),
        (
            os.path.join("sub", "weights.bin"),
            2,
            weights_stat.st_mtime_ns,
            weights_stat.st_ctime_ns,
        ),
    )


def test_version_folder_renamed_into_place_keeps_its_fingerprint(tmp_path: Path) -> None:
    staged = touch(tmp_path / "staging" / "m" / "2" / "model.onnx").parent
    os.utime(staged, ns=(HOUR_AGO_NS, HOUR_AGO_NS))
    before = scan_model(tmp_path / "staging" / "m").versions[2].fingerprint
    (tmp_path / "repo" / "m").mkdir(parents=True)
    os.rename(staged, tmp_path / "repo" / "m" / "2")
    assert scan_model(tmp_path / "repo" / "m").versions[2].fingerprint == before


def test_fingerprint_changes_when_a_file_grows_or_appears(tmp_path: Path) -> None:
    version = tmp_path / "m" / "1"
    touch(version / "model.onnx", b"half")
    first = scan_model(tmp_path / "m").versions[1].fingerprint

    with open(version / "model.onnx", "ab") as handle:
        handle.write(b" and the rest")
    grown = scan_model(tmp_path / "m").versions[1].fingerprint
    touch(version / "extra.bin")
    appeared = scan_model(tmp_path / "m").versions[1].fingerprint

    assert len({first, grown, appeared}) == 3
    assert scan_model(tmp_path / "m").versions[1].fingerprint == appeared


def test_pycache_does_not_change_the_fingerprint(tmp_path: Path) -> None:
    version = tmp_path / "m" / "1"
    touch(version / "model.py", b"print('hi')\n")
    (version / "__pycache__").mkdir()
    before = scan_model(tmp_path / "m").versions[1].fingerprint
    touch(version / "__pycache__" / "model.cpython-310.pyc", b"compiled")
    after = scan_model(tmp_path / "m").versions[1].fingerprint
    assert [entry[0] for entry in after] == [".", "model.py"]
    assert after == before


def test_config_fingerprint_follows_config_pbtxt(tmp_path: Path) -> None:
    config = touch(tmp_path / "m" / "config.pbtxt", b'platform: "onnxruntime_onnx"\n')
    stat = config.stat()
    folder = scan_model(tmp_path / "m")
    assert folder.config_fingerprint == (
        ("config.pbtxt", stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns),
    )


def test_scan_without_fingerprints(tmp_path: Path) -> None:
    touch(tmp_path / "m" / "config.pbtxt")
    touch(tmp_path / "m" / "3" / "model.onnx")
    folder = scan_repository(tmp_path, fingerprints=False).models["m"]
    assert folder.config_fingerprint == ()
    assert folder.versions[3].fingerprint == ()
