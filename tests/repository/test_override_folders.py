"""The override folders a load request's files are written to: private,
complete before anyone sees them, capped, removed once unused, and gone at
the next start."""

from __future__ import annotations

import os
import stat

import pytest

from edgebox.errors import Unsupported
from edgebox.repository.override_files import OverrideFile
from edgebox.repository.override_folders import (
    OverrideFilesTooLarge,
    OverrideFolderError,
    OverrideFolders,
)

FILES = [OverrideFile("1/model.onnx", b"onnx"), OverrideFile("labels.txt", b"a\nb\n")]


def test_the_files_are_written_complete_to_a_private_folder(tmp_path):
    folders = OverrideFolders(tmp_path / "overrides", 1024)
    with folders.write("lane", FILES, set()) as model_dir:
        assert model_dir.name == "lane"
        assert model_dir.parent.parent == tmp_path / "overrides"
        assert (model_dir / "1" / "model.onnx").read_bytes() == b"onnx"
        assert (model_dir / "labels.txt").read_bytes() == b"a\nb\n"
        assert not list((tmp_path / "overrides").glob(".incoming-*"))
        for path in (tmp_path / "overrides", model_dir, model_dir / "1"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
        assert stat.S_IMODE((model_dir / "1" / "model.onnx").stat().st_mode) == 0o600


def test_a_folder_is_kept_while_in_use_and_removed_once_not(tmp_path):
    folders = OverrideFolders(tmp_path / "overrides", 1024)
    with folders.write("lane", FILES, set()) as model_dir:
        folders.sweep(lambda: set())
        assert model_dir.is_dir()
    folders.sweep(lambda: {model_dir})
    assert model_dir.is_dir()
    assert folders.held_bytes() == 8
    folders.sweep(lambda: {tmp_path / "repo" / "lane"})
    assert not model_dir.parent.exists()
    assert folders.held_bytes() == 0


def test_a_load_whose_files_alone_are_over_the_cap_is_refused_before_writing(tmp_path):
    folders = OverrideFolders(tmp_path / "overrides", 7)
    with (
        pytest.raises(OverrideFilesTooLarge, match=r"the files total 8 bytes, more than"),
        folders.write("lane", FILES, set()),
    ):
        pass
    assert not (tmp_path / "overrides").exists()


def test_files_that_do_not_fit_beside_others_wait_for_an_unload(tmp_path):
    folders = OverrideFolders(tmp_path / "overrides", 12)
    with folders.write("lane", FILES, set()) as kept:
        pass
    with (
        pytest.raises(OverrideFolderError, match=r"do not fit beside the 8 bytes"),
        folders.write("other", FILES, set()),
    ):
        pass
    with folders.write("lane", FILES, {kept}) as replacing:
        assert replacing != kept


def test_no_file_loads_without_a_folder_or_with_a_cap_of_zero(tmp_path):
    for folders in (OverrideFolders(None, 1024), OverrideFolders(tmp_path / "o", 0)):
        with (
            pytest.raises(Unsupported, match=r"load_files_max_bytes is 0"),
            folders.write("lane", FILES, set()),
        ):
            pass


def test_a_write_that_fails_leaves_nothing_behind(tmp_path, monkeypatch):
    def failing_rename(source, target):
        raise OSError(28, "No space left on device")

    folders = OverrideFolders(tmp_path / "overrides", 1024)
    monkeypatch.setattr(os, "rename", failing_rename)
    with (
        pytest.raises(OverrideFolderError, match=r"could not write its files: No space left"),
        folders.write("lane", FILES, set()),
    ):
        raise AssertionError("a half-written folder was handed out")
    assert list((tmp_path / "overrides").iterdir()) == []
    assert folders.held_bytes() == 0


def test_what_a_previous_run_left_is_removed_at_start(tmp_path):
    root = tmp_path / "overrides"
    (root / "0123abcd" / "lane" / "1").mkdir(parents=True)
    (root / ".incoming-4567" / "lane").mkdir(parents=True)
    (root / "stray").write_text("x")
    OverrideFolders(root, 1024)
    assert list(root.iterdir()) == []


def test_a_root_that_is_a_link_is_not_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "overrides").symlink_to(elsewhere)
    folders = OverrideFolders(tmp_path / "overrides", 1024)
    with (
        pytest.raises(OverrideFolderError, match=r"could not write its files"),
        folders.write("lane", FILES, set()),
    ):
        pass
    assert list(elsewhere.iterdir()) == []
