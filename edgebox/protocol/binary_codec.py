"""Triton's binary tensor data extension: raw little-endian, row-major tensor
bytes after the JSON header, sized by ``binary_data_size``; BYTES elements are a
4-byte little-endian length followed by the bytes.

Fixed-size tensors are decoded as numpy views over the request buffer and
encoded as the output arrays themselves: no copy either way.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
"""

from __future__ import annotations

import math
import struct

import numpy as np

from edgebox.errors import InvalidArgument
from edgebox.tensors import Tensor, numpy_dtype

_LENGTH = struct.Struct("<I")


def decode_tensor(where: str, datatype: str, shape: list[int], raw: memoryview) -> np.ndarray:
    count = math.prod(shape)
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


def serialize_bytes(array: np.ndarray) -> bytes:
    parts = []
    for item in array.ravel():
        value = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def _decode_bytes(where: str, shape: list[int], count: int, raw: memoryview) -> np.ndarray:
    array = np.empty(count, dtype=object)
    offset = 0
    size = len(raw)
    for index in range(count):
        if offset + 4 > size:
            raise InvalidArgument(f"{where}: BYTES data ends after {index} of {count} elements")
        (length,) = _LENGTH.unpack_from(raw, offset)
        offset += 4
        if offset + length > size:
            raise InvalidArgument(
                f"{where}: BYTES element {index} claims {length} bytes but only "
                f"{size - offset} remain"
            )
        array[index] = bytes(raw[offset : offset + length])
        offset += length
    if offset != size:
        raise InvalidArgument(
            f"{where}: {size - offset} bytes left over after {count} BYTES elements"
        )
    return array.reshape(shape)
