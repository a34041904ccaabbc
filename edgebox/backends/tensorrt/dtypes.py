"""TensorRT data types as Triton's ``TYPE_*`` names and the numpy dtypes that
carry them.

TensorRT types are matched by name (``FLOAT``, ``HALF``...), not by enum value,
so one table serves TensorRT 8.5, 8.6 and 10.x, whose enums differ. Types that
have no Triton counterpart (FP8, INT4, FP4) are reported, never guessed.
"""

from __future__ import annotations

import numpy as np

from edgebox.tensors import config_type_to_datatype, numpy_dtype

CONFIG_TYPE_BY_TENSORRT: dict[str, str] = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
}


def tensorrt_type_name(dtype: object) -> str:
    """``trt.DataType.HALF`` -> ``HALF``, whatever the binding prints."""
    name = getattr(dtype, "name", None)
    if isinstance(name, str) and name:
        return name
    return str(dtype).rsplit(".", 1)[-1]


def config_type_of(dtype: object) -> str | None:
    """The ``TYPE_*`` name for a TensorRT data type; None when Triton has none."""
    return CONFIG_TYPE_BY_TENSORRT.get(tensorrt_type_name(dtype))


def buffer_dtype(config_type: str) -> np.dtype:
    """The numpy dtype a tensor of ``config_type`` travels in. BF16 travels as
    its raw ``uint16`` bits, which is also how TensorRT lays it out."""
    return numpy_dtype(config_type_to_datatype(config_type))
