"""Zeros for a config's ``zero_data`` (warm-up inputs, a state's first value),
made in one place for both."""

from __future__ import annotations

import numpy as np
import pytest

from edgebox.repository.tensor_file import zeros


@pytest.mark.parametrize(
    ("datatype", "dtype"),
    [("FP32", np.float32), ("INT64", np.int64), ("UINT8", np.uint8), ("BOOL", np.bool_)],
)
def test_numeric_zeros_have_the_datatype_and_shape(datatype: str, dtype) -> None:
    data = zeros(datatype, [2, 3])
    assert data.dtype == dtype
    assert data.shape == (2, 3)
    assert not data.any()


def test_bytes_zeros_are_empty_byte_strings() -> None:
    data = zeros("BYTES", [1, 2])
    assert data.dtype == object
    assert data.tolist() == [[b"", b""]]


def test_a_scalar_shape_gives_one_zero() -> None:
    assert zeros("INT32", []).shape == ()
