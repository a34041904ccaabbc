"""Rolling a model back to an earlier version folder and restoring it
(edgebox/repository/rollback.py): renames inside the model folder, refusals
before anything moves, nothing ever deleted, and a parked folder the scanner
never reads as a version."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.errors import ErrorCode, InvalidArgument, NotFound
from edgebox.repository.layout import scan_model, scan_repository
from edgebox.repository.rollback import (
    ROLLED_BACK,
    model_folder,
    parse_version,
    restore,
    roll_back,
    version_folders,
)


def make_model(root: Path, versions=(1, 2, 3), name: str = "m") -> Path:
    model_dir = root / name
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text('name: "m"\n')
    for version in versions:
        (model_dir / str(version)).mkdir()
        (model_dir / str(version) / "model.onnx").write_bytes(f"v{version}".encode())
    return model_dir


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.name + "@" + p.parent.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_roll_back_parks_every_newer_version_and_keeps_their_files(tmp_path):
    model_dir = make_model(tmp_path)
    before = files_under(model_dir)

    assert roll_back(model_dir, 1) == [2, 3]

    assert sorted(p.name for p in model_dir.iterdir()) == [ROLLED_BACK, "1", "config.pbtxt"]
    assert sorted(p.name for p in (model_dir / ROLLED_BACK).iterdir()) == ["2", "3"]
    assert (model_dir / ROLLED_BACK / "3" / "model.onnx").read_bytes() == b"v3"
    assert files_under(model_dir) == before
    assert version_folders(model_dir) == ((1,), (2, 3))


def test_roll_back_to_the_middle_leaves_older_versions_in_place(tmp_path):
    model_dir = make_model(tmp_path)
    assert roll_back(model_dir, 2) == [3]
    assert version_folders(model_dir) == ((1, 2), (3,))
    assert roll_back(model_dir, 1) == [2]
    assert version_folders(model_dir) == ((1,), (2, 3))


def test_restore_moves_every_parked_version_back(tmp_path):
    model_dir = make_model(tmp_path)
    before = files_under(model_dir)
    roll_back(model_dir, 1)

    assert restore(model_dir) == [2, 3]

    assert version_folders(model_dir) == ((1, 2, 3), ())
    assert files_under(model_dir) == before
    assert not (model_dir / ROLLED_BACK).exists()  # only ever removed when empty


def test_the_parked_folder_is_never_read_as_a_version(tmp_path):
    model_dir = make_model(tmp_path / "repo")
    roll_back(model_dir, 1)

    assert list(scan_model(model_dir).versions) == [1]
    snapshot = scan_repository(tmp_path / "repo")
    assert list(snapshot.models) == ["m"]
    assert list(snapshot.models["m"].versions) == [1]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (3, "model 'm' rollback: version 3 is the newest version folder; expected an older one"),
        (7, "model 'm' rollback: version 7 has no version folder; expected one of 1, 2, 3"),
    ],
)
def test_roll_back_refuses_a_version_that_is_not_an_older_folder(tmp_path, version, message):
    model_dir = make_model(tmp_path)
    with pytest.raises(InvalidArgument) as caught:
        roll_back(model_dir, version)
    assert str(caught.value) == message
    assert version_folders(model_dir) == ((1, 2, 3), ())


def test_roll_back_refuses_when_a_parked_folder_is_in_the_way_and_moves_nothing(tmp_path):
    model_dir = make_model(tmp_path)
    (model_dir / ROLLED_BACK / "3").mkdir(parents=True)
    (model_dir / ROLLED_BACK / "3" / "old").write_bytes(b"kept")
    with pytest.raises(Exception) as caught:
        roll_back(model_dir, 1)
    assert caught.value.code is ErrorCode.ALREADY_EXISTS
    assert str(caught.value) == (
        "model 'm' rollback: '.rolled-back/3' already exists; restore it or move it away first"
    )
    assert (model_dir / "2").is_dir() and (model_dir / "3").is_dir()
    assert (model_dir / ROLLED_BACK / "3" / "old").read_bytes() == b"kept"


def test_restore_with_nothing_parked_is_refused(tmp_path):
    model_dir = make_model(tmp_path)
    with pytest.raises(Exception) as caught:
        restore(model_dir)
    assert caught.value.code is ErrorCode.UNSUPPORTED
    assert str(caught.value) == "model 'm' restore: nothing to restore (no rolled-back version)"


def test_restore_refuses_when_the_version_folder_is_back_and_moves_nothing(tmp_path):
    model_dir = make_model(tmp_path)
    roll_back(model_dir, 1)
    (model_dir / "3").mkdir()
    (model_dir / "3" / "model.onnx").write_bytes(b"new v3")
    with pytest.raises(Exception) as caught:
        restore(model_dir)
    assert caught.value.code is ErrorCode.ALREADY_EXISTS
    assert str(caught.value) == (
        "model 'm' restore: version folder '3' exists again; move it or '.rolled-back/3' away first"
    )
    assert version_folders(model_dir) == ((1, 3), (2, 3))
    assert (model_dir / "3" / "model.onnx").read_bytes() == b"new v3"
    assert (model_dir / ROLLED_BACK / "3" / "model.onnx").read_bytes() == b"v3"


def test_parked_entries_that_are_not_version_folders_stay_put(tmp_path):
    model_dir = make_model(tmp_path)
    roll_back(model_dir, 2)
    (model_dir / ROLLED_BACK / "notes.txt").write_text("why")
    (model_dir / ROLLED_BACK / "04").mkdir()
    assert version_folders(model_dir) == ((1, 2), (3,))
    assert restore(model_dir) == [3]
    assert sorted(p.name for p in (model_dir / ROLLED_BACK).iterdir()) == ["04", "notes.txt"]


@pytest.mark.parametrize(("value", "expected"), [(1, 1), ("12", 12), (20240131, 20240131)])
def test_parse_version_takes_a_number_or_its_digits(value, expected):
    assert parse_version(value, "model 'm' rollback") == expected


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "01", "1/..", "../2", "", "\u0661", None, [1]])
def test_parse_version_refuses_anything_but_a_plain_version_number(value):
    with pytest.raises(InvalidArgument) as caught:
        parse_version(value, "model 'm' rollback")
    assert str(caught.value) == (
        "model 'm' rollback: 'version': expected a version number "
        f"(a positive integer without a leading zero), got {value!r}"
    )


def test_model_folder_is_a_model_the_scanner_sees(tmp_path):
    make_model(tmp_path)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "stray").write_text("x")
    assert model_folder(tmp_path, "m") == tmp_path / "m"
    for name in ("absent", ".hidden", "stray"):
        with pytest.raises(NotFound) as caught:
            model_folder(tmp_path, name)
        assert str(caught.value) == f"unknown model '{name}': no such model folder"
    for name in ("..", "a/b", ""):
        with pytest.raises(InvalidArgument):
            model_folder(tmp_path, name)


def test_a_rename_failing_midway_undoes_the_moves_already_made(tmp_path, monkeypatch):
    model_dir = make_model(tmp_path)
    real_rename = __import__("os").rename

    def rename(source, target):
        if Path(source).name == "3":
            raise OSError(28, "No space left on device")
        real_rename(source, target)

    monkeypatch.setattr("edgebox.repository.rollback.os.rename", rename)
    with pytest.raises(Exception) as caught:
        roll_back(model_dir, 1)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert str(caught.value).startswith("model 'm' rollback: cannot move '3' to ")
    assert str(caught.value).endswith(
        ": No space left on device; the moves already made were undone"
    )
    assert version_folders(model_dir) == ((1, 2, 3), ())
