"""Triton's binary tensor data extension: raw little-endian, row-major tensor
bytes after the JSON header, sized by ``binary_data_size``; BYTES elements are a
4-byte little-endian length followed by the bytes.

Fixed-size tensors are decoded as numpy views over the request buffer and
encoded as the output arrays themselves: no copy either way.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
"""

from __future__ import annotations

import numpy as np

from edgebox.errors import InvalidArgument
from edgebox.tensors import Tensor, deserialize_bytes, numpy_dtype, serialize_bytes


def decode_tensor(
    where: str, datatype: str, shape: list[int], count: int, raw: memoryview
) -> np.ndarray:
    """``count`` elements of ``shape`` (as ``infer_codec.element_count`` checked
    it) from ``raw``; fixed-size types become a view over ``raw``."""
    if datatype == "BYTES":
        return _decode_bytes(where, shape, count, raw)
    dtype = numpy_dtype(datatype)
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise InvalidArgument(
            f"{where}: binary_data_size is {len(raw)} but shape {shape} of {datatype} "
            f"needs {expected} bytes"
        )
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


def encode_tensor(tensor: Tensor):
    """A buffer holding the tensor's wire bytes (the array itself when it can be)."""
    if tensor.datatype == "BYTES":
        return serialize_bytes(tensor.data)
    return np.ascontiguousarray(tensor.data)


def _decode_bytes(where: str, shape: list[int], count: int, raw: memoryview) -> np.ndarray:
    try:
        return deserialize_bytes(raw, count).reshape(shape)
    except ValueError as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
