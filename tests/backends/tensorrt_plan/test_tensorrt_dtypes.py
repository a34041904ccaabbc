"""TensorRT data types as Triton ``TYPE_*`` names and numpy buffer dtypes,
matched by name so TensorRT 8.5, 8.6 and 10.x enums all map."""

from __future__ import annotations

import enum

import numpy as np
import pytest

from edgebox.backends.tensorrt.dtypes import buffer_dtype, config_type_of, tensorrt_type_name

DataType = enum.Enum("DataType", "FLOAT HALF BF16 INT8 UINT8 INT32 INT64 BOOL FP8 INT4")


@pytest.mark.parametrize(
    ("tensorrt", "config", "numpy"),
    [
        ("FLOAT", "TYPE_FP32", np.float32),
        ("HALF", "TYPE_FP16", np.float16),
        ("BF16", "TYPE_BF16", np.uint16),
        ("INT8", "TYPE_INT8", np.int8),
        ("UINT8", "TYPE_UINT8", np.uint8),
        ("INT32", "TYPE_INT32", np.int32),
        ("INT64", "TYPE_INT64", np.int64),
        ("BOOL", "TYPE_BOOL", np.bool_),
    ],
)
def test_tensorrt_types_map_to_triton_types_and_buffers(tensorrt, config, numpy) -> None:
    assert config_type_of(DataType[tensorrt]) == config
    assert buffer_dtype(config) == np.dtype(numpy)


@pytest.mark.parametrize("name", ["FP8", "INT4"])
def test_types_triton_cannot_name_are_reported_not_guessed(name: str) -> None:
    assert config_type_of(DataType[name]) is None


def test_type_name_comes_from_the_enum_or_its_printed_form() -> None:
    class PrintedOnly:
        def __str__(self) -> str:
            return "DataType.HALF"

    assert tensorrt_type_name(DataType.HALF) == "HALF"
    assert tensorrt_type_name(PrintedOnly()) == "HALF"
