"""A load request's ``file:`` parameters: each path names a file inside the
model folder or the request is refused, naming the parameter and why."""

from __future__ import annotations

import pytest

from edgebox.errors import InvalidArgument
from edgebox.repository.override_files import MAX_FILES, OverrideFile, override_files


def test_the_file_parameters_come_back_checked_in_path_order():
    parameters = {"config": "{}", "file:2/model.onnx": b"b", "file:1/model.onnx": b"a"}
    assert override_files(parameters) == [
        OverrideFile("1/model.onnx", b"a"),
        OverrideFile("2/model.onnx", b"b"),
    ]


def test_a_request_without_files_has_none():
    assert override_files({"config": "{}"}) == []


@pytest.mark.parametrize(
    "path",
    [
        "labels.txt",
        "1/model.onnx",
        "3/sub/dir/weights.bin",
        "warmup/input0",
        "1/" + "a" * 255,
        "1/n\u00e9e.onnx",
        "1/back\\slash",
    ],
)
def test_a_path_inside_the_model_folder_is_accepted(path):
    assert override_files({f"file:{path}": b""})[0].path == path


@pytest.mark.parametrize(
    "path, why",
    [
        ("", "the path is empty"),
        ("../x", "'..' is not allowed as a path component"),
        ("1/../../x", "'..' is not allowed as a path component"),
        ("1/..", "'..' is not allowed as a path component"),
        ("./1/model.onnx", "'.' is not allowed as a path component"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("1//model.onnx", "empty path component"),
        ("1/model.onnx/", "empty path component"),
        ("1/" + "a" * 256, "is longer than 255 bytes (NAME_MAX)"),
        ("1/" + "\u00e9" * 128, "is longer than 255 bytes (NAME_MAX)"),
        ("1/a\0b", "control characters (NUL included) are not allowed"),
        ("1/a\nb", "control characters (NUL included) are not allowed"),
        ("1/\ud800", "the path is not valid UTF-8"),
        ("/".join(["d"] * 33), "33 levels deep"),
        ("1/" + "/".join(["a" * 200] * 21), "longer than 4095 bytes (PATH_MAX)"),
        ("config.pbtxt", "comes from the 'config' parameter"),
        ("01/model.onnx", "version folder '01'"),
        ("0/model.onnx", "version folder '0'"),
        ("9223372036854775808/model.onnx", "at most 2^63-1"),
        ("1", "'1' is a version folder; put the model's files inside it"),
    ],
)
def test_a_path_that_is_not_a_plain_name_inside_the_folder_is_refused(path, why):
    with pytest.raises(InvalidArgument) as raised:
        override_files({f"file:{path}": b"x", "file:1/model.onnx": b"y"})
    assert str(raised.value).startswith("Invalid file path 'file:")
    assert why in str(raised.value)


def test_a_path_both_a_file_and_a_folder_is_refused():
    with pytest.raises(InvalidArgument, match=r"'1/sub' is sent as a file too"):
        override_files({"file:1/sub": b"x", "file:1/sub/model.onnx": b"y"})


def test_a_value_that_is_not_bytes_is_refused():
    with pytest.raises(InvalidArgument, match=r"'file:1/model.onnx', expected bytes"):
        override_files({"file:1/model.onnx": "eA=="})


def test_too_many_files_are_refused_before_any_path_is_looked_at():
    parameters = {f"file:1/f{i}": b"" for i in range(MAX_FILES + 1)}
    with pytest.raises(InvalidArgument, match=rf"at most {MAX_FILES} are accepted"):
        override_files(parameters)


def test_a_refused_path_is_shown_shortened():
    with pytest.raises(InvalidArgument) as raised:
        override_files({"file:1/" + "A" * 300: b"x"})
    assert len(str(raised.value)) < 200
