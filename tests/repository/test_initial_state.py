"""A sequence's first input-state value: zeros, ``zero_data``, or a file under
``<model>/initial_state`` read like a warm-up data file (inside the folder,
exact size), shaped as the dims with a leading 1 for a batching model, and
read-only because every sequence shares it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from edgebox.errors import ErrorCode, InvalidArgument, Unavailable
from edgebox.repository.initial_state import initial_state_value
from edgebox.tensors import serialize_bytes

WHERE = "model 'acc' version 1"


def state(text: str):
    return text_format.Parse(text, model_config_pb2.ModelSequenceBatching.State())


def model_folder(tmp_path: Path, files: dict[str, bytes] | None = None) -> Path:
    model_dir = tmp_path / "acc"
    (model_dir / "initial_state").mkdir(parents=True)
    for name, data in (files or {}).items():
        (model_dir / "initial_state" / name).write_bytes(data)
    return model_dir


def from_file(data_type: str, dims: str, data_file: str = "init.bin") -> object:
    return state(
        f'input_name: "IS" output_name: "OS" data_type: {data_type} dims: {dims} '
        f'initial_state {{ name: "i" data_type: {data_type} dims: {dims} '
        f'data_file: "{data_file}" }}'
    )


def test_without_initial_state_variable_dims_start_as_one_and_values_as_zero(
    tmp_path: Path,
) -> None:
    value = initial_state_value(
        state('input_name: "IS" output_name: "OS" data_type: TYPE_FP32 dims: [ -1, 3 ]'),
        model_folder(tmp_path),
        batched=False,
        where=WHERE,
    )
    assert value.dtype == np.float32
    assert value.shape == (1, 3)
    assert not value.any()


def test_a_batching_model_gets_a_leading_batch_dim_of_one(tmp_path: Path) -> None:
    value = initial_state_value(
        state('input_name: "IS" output_name: "OS" data_type: TYPE_INT64 dims: [ 2 ]'),
        model_folder(tmp_path),
        batched=True,
        where=WHERE,
    )
    assert value.shape == (1, 2)
    assert value.dtype == np.int64


def test_zero_data_takes_the_initial_state_dims(tmp_path: Path) -> None:
    value = initial_state_value(
        state(
            'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ -1 ] '
            'initial_state { name: "z" data_type: TYPE_INT32 dims: [ 4 ] zero_data: true }'
        ),
        model_folder(tmp_path),
        batched=True,
        where=WHERE,
    )
    assert value.tolist() == [[0, 0, 0, 0]]
    assert value.dtype == np.int32


def test_bytes_zeros_are_empty_strings(tmp_path: Path) -> None:
    value = initial_state_value(
        state('input_name: "IS" output_name: "OS" data_type: TYPE_STRING dims: [ 2 ]'),
        model_folder(tmp_path),
        batched=False,
        where=WHERE,
    )
    assert value.dtype == object
    assert value.tolist() == [b"", b""]


def test_a_data_file_is_read_row_major_as_the_datatype(tmp_path: Path) -> None:
    raw = np.arange(6, dtype=np.float32).tobytes()
    value = initial_state_value(
        from_file("TYPE_FP32", "[ 2, 3 ]"),
        model_folder(tmp_path, {"init.bin": raw}),
        batched=True,
        where=WHERE,
    )
    assert value.shape == (1, 2, 3)
    assert value.tolist() == [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]


def test_a_string_data_file_uses_the_length_prefixed_layout(tmp_path: Path) -> None:
    raw = serialize_bytes(np.array([b"ab", b""], dtype=object))
    value = initial_state_value(
        from_file("TYPE_STRING", "[ 2 ]"),
        model_folder(tmp_path, {"init.bin": raw}),
        batched=False,
        where=WHERE,
    )
    assert value.dtype == object
    assert value.tolist() == [b"ab", b""]


def test_every_value_is_read_only(tmp_path: Path) -> None:
    model_dir = model_folder(tmp_path, {"init.bin": bytes(8)})
    values = [
        initial_state_value(
            state('input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ 2 ]'),
            model_dir,
            False,
            WHERE,
        ),
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]"), model_dir, False, WHERE),
        initial_state_value(
            state(
                'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ 2 ] '
                'initial_state { name: "z" data_type: TYPE_INT32 dims: [ 2 ] zero_data: true }'
            ),
            model_dir,
            True,
            WHERE,
        ),
    ]
    assert [v.flags.writeable for v in values] == [False, False, False]
    with pytest.raises(ValueError):
        values[0][0] = 1


def test_a_missing_data_file_is_unavailable_naming_model_state_and_file(tmp_path: Path) -> None:
    model_dir = model_folder(tmp_path)
    with pytest.raises(Unavailable) as info:
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]", "gone.bin"), model_dir, False, WHERE)
    assert str(info.value) == (
        f"model 'acc' version 1, state 'IS': initial_state data_file "
        f"'{model_dir / 'initial_state' / 'gone.bin'}' not found"
    )


def test_a_data_file_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    model_dir = model_folder(tmp_path, {"init.bin": bytes(12)})
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]"), model_dir, True, WHERE)
    assert str(info.value) == (
        f"model 'acc' version 1, state 'IS': '{model_dir / 'initial_state' / 'init.bin'}' "
        "holds 12 bytes, shape [1, 2] of INT32 needs 8"
    )
    assert info.value.code is ErrorCode.INVALID_ARG


def test_a_short_string_data_file_is_refused(tmp_path: Path) -> None:
    raw = serialize_bytes(np.array([b"ab"], dtype=object))
    model_dir = model_folder(tmp_path, {"init.bin": raw})
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(from_file("TYPE_STRING", "[ 2 ]"), model_dir, False, WHERE)
    assert str(info.value) == (
        f"model 'acc' version 1, state 'IS': '{model_dir / 'initial_state' / 'init.bin'}': "
        "2 BYTES elements need at least 8 bytes, got 6"
    )


@pytest.mark.parametrize("name", ["../secret.bin", "/etc/passwd"])
def test_a_data_file_outside_the_initial_state_folder_is_refused(tmp_path: Path, name: str) -> None:
    model_dir = model_folder(tmp_path)
    (model_dir / "secret.bin").write_bytes(bytes(8))
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]", name), model_dir, False, WHERE)
    assert str(info.value) == (
        f"model 'acc' version 1, state 'IS': initial_state data_file '{name}' is outside "
        "the model's initial_state folder"
    )


def test_a_symlink_leading_out_of_the_model_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(bytes(8))
    model_dir = model_folder(tmp_path)
    os.symlink(outside, model_dir / "initial_state" / "link.bin")
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]", "link.bin"), model_dir, False, WHERE)
    assert str(info.value) == (
        "model 'acc' version 1, state 'IS': initial_state data_file 'link.bin' is outside "
        "the model folder (a symlink leads out)"
    )


def test_a_data_file_that_is_not_a_regular_file_is_refused_without_reading(
    tmp_path: Path,
) -> None:
    model_dir = model_folder(tmp_path)
    (model_dir / "initial_state" / "dir.bin").mkdir()
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(from_file("TYPE_INT32", "[ 2 ]", "dir.bin"), model_dir, False, WHERE)
    assert str(info.value) == (
        f"model 'acc' version 1, state 'IS': '{model_dir / 'initial_state' / 'dir.bin'}' "
        "is not a regular file"
    )


def test_initial_state_with_a_variable_dim_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        initial_state_value(
            state(
                'input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [ -1 ] '
                'initial_state { name: "z" data_type: TYPE_INT32 dims: [ -1 ] zero_data: true }'
            ),
            model_folder(tmp_path),
            False,
            WHERE,
        )
    assert str(info.value) == (
        "model 'acc' version 1, state 'IS': initial_state dims must each be >= 1, got [-1]"
    )
