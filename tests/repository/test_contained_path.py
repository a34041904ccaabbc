"""Paths a config names stay inside their folder, after symlinks; model names
are single folder names; named files are read only when they are regular files
of a bounded size."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from edgebox.errors import ErrorCode, InvalidArgument, Unavailable
from edgebox.repository.contained_path import (
    FileTooLarge,
    model_file_inside,
    path_problem,
    read_regular_file,
    resolve_inside,
)
from edgebox.repository.names import check_model_name, model_name_problem


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "labels.txt").write_text("cat\ndog\n")
    (tmp_path / "secret.txt").write_text("root:x:0:0\n")
    return folder


@pytest.mark.parametrize(
    ("name", "start", "problem"),
    [
        ("/etc/passwd", "", "label_filename '/etc/passwd' is outside the model folder"),
        (
            "../../../etc/passwd",
            "",
            "label_filename '../../../etc/passwd' is outside the model folder",
        ),
        ("a/../../x", "", "label_filename 'a/../../x' is outside the model folder"),
        ("..", "", "label_filename '..' is outside the model folder"),
        (".", "", "label_filename '.' names the model folder itself, not a file in it"),
        ("a\0b", "", "label_filename 'a\\0b' contains a NUL character"),
        ("../../x.py", "1", "label_filename '../../x.py' is outside the model folder"),
    ],
)
def test_names_that_leave_the_folder_are_refused_before_any_file_is_touched(
    name: str, start: str, problem: str
) -> None:
    assert path_problem("label_filename", name, start=start) == problem


@pytest.mark.parametrize(
    ("name", "start"),
    [
        ("labels.txt", ""),
        ("sub/labels.txt", ""),
        ("sub/../labels.txt", ""),
        ("../shared.onnx", "1"),
    ],
)
def test_names_inside_the_folder_pass(name: str, start: str) -> None:
    assert path_problem("label_filename", name, start=start) is None


def test_resolve_inside_returns_the_path_as_the_config_names_it(model_dir: Path) -> None:
    path = resolve_inside(model_dir, "labels.txt", "label_filename", "model 'm'")
    assert path == model_dir / "labels.txt"


def test_resolve_inside_refuses_an_absolute_name(model_dir: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        resolve_inside(model_dir, "/etc/passwd", "label_filename", "model 'm'")
    assert str(info.value) == "model 'm': label_filename '/etc/passwd' is outside the model folder"
    assert info.value.code is ErrorCode.INVALID_ARG


def test_a_symlink_leading_out_of_the_folder_is_refused(model_dir: Path) -> None:
    (model_dir / "labels_link.txt").symlink_to(model_dir.parent.parent / "secret.txt")
    with pytest.raises(InvalidArgument) as info:
        resolve_inside(model_dir, "labels_link.txt", "label_filename", "model 'm'")
    assert str(info.value) == (
        "model 'm': label_filename 'labels_link.txt' is outside the model folder "
        "(a symlink leads out)"
    )
    assert "secret" not in str(info.value)


def test_a_symlinked_folder_inside_leading_out_is_refused(model_dir: Path) -> None:
    (model_dir / "data").symlink_to("/etc")
    with pytest.raises(InvalidArgument):
        resolve_inside(model_dir, "data/passwd", "label_filename", "model 'm'")


def test_a_model_folder_that_is_itself_a_symlink_keeps_its_files(
    tmp_path: Path, model_dir: Path
) -> None:
    linked = tmp_path / "linked_repo"
    linked.mkdir()
    (linked / "m").symlink_to(model_dir)
    path = resolve_inside(linked / "m", "labels.txt", "label_filename", "model 'm'")
    assert path.read_text() == "cat\ndog\n"


def test_a_symlink_between_files_of_the_folder_is_fine(model_dir: Path) -> None:
    (model_dir / "1" / "labels.txt").symlink_to("../labels.txt")
    path = resolve_inside(model_dir, "1/labels.txt", "label_filename", "model 'm'")
    assert path.read_text() == "cat\ndog\n"


def test_model_file_is_taken_from_the_version_folder(model_dir: Path) -> None:
    (model_dir / "1" / "model.py").write_text("")
    path = model_file_inside(model_dir, model_dir / "1", "model.py", "model 'm' version 1")
    assert path == model_dir / "1" / "model.py"


def test_an_absolute_model_file_is_refused_even_when_it_exists(
    tmp_path: Path, model_dir: Path
) -> None:
    evil = tmp_path / "evil.py"
    evil.write_text("")
    with pytest.raises(InvalidArgument) as info:
        model_file_inside(model_dir, model_dir / "1", str(evil), "model 'm' version 1")
    assert str(info.value) == (
        f"model 'm' version 1: default_model_filename '{evil}' is outside the model folder"
    )


def test_a_missing_model_file_is_unavailable(model_dir: Path) -> None:
    with pytest.raises(Unavailable) as info:
        model_file_inside(model_dir, model_dir / "1", "model.onnx", "model 'm' version 1")
    assert str(info.value) == (
        f"model 'm' version 1: model file '{model_dir / '1' / 'model.onnx'}' not found"
    )


# ------------------------------------------------------------------ model names


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "../etc", "a\0b"])
def test_model_names_must_be_single_folder_names(name: str) -> None:
    shown = name.replace("\0", "\\0")
    assert model_name_problem(name) == (
        f"model name '{shown}': expected a single folder name (not '.' or '..', without '/' or NUL)"
    )
    with pytest.raises(InvalidArgument):
        check_model_name(name)


@pytest.mark.parametrize("name", ["add_sub", "model.v2", "..hidden_but_valid", "a-b"])
def test_ordinary_model_names_pass(name: str) -> None:
    assert model_name_problem(name) is None


# ------------------------------------------------------------------ reading


def test_read_regular_file_reads_the_whole_file(model_dir: Path) -> None:
    assert read_regular_file(model_dir / "labels.txt", 100) == b"cat\ndog\n"


def test_a_file_over_the_limit_is_refused_before_it_is_read(model_dir: Path) -> None:
    big = model_dir / "big.bin"
    with open(big, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: reading it would allocate 1 GiB
    with pytest.raises(FileTooLarge) as info:
        read_regular_file(big, 8)
    assert str(info.value) == "holds 1073741824 bytes, more than the 8 allowed"


def test_a_device_is_not_a_regular_file() -> None:
    with pytest.raises(ValueError, match=r"^is not a regular file$"):
        read_regular_file(Path("/dev/zero"), 8)


def test_a_directory_is_not_a_regular_file(model_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"^is not a regular file$"):
        read_regular_file(model_dir / "1", 8)


def test_a_fifo_is_refused_without_waiting_for_a_writer(model_dir: Path) -> None:
    fifo = model_dir / "pipe"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_regular_file(fifo, 8)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():
        with open(fifo, "wb"):  # unblock the reader so the thread ends
            pass
        pytest.fail("reading a FIFO blocked waiting for a writer")
    assert [str(e) for e in outcome] == ["is not a regular file"]
