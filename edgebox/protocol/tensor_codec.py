"""Tensors as raw bytes, and the checks on a client's shape, shared by every
transport: Triton's binary tensor data extension over HTTP and gRPC's
``raw_input_contents`` / ``raw_output_contents`` carry the same bytes.

Raw little-endian, row-major tensor bytes; BYTES elements are a 4-byte
little-endian length followed by the bytes. Fixed-size tensors are decoded as
numpy views over the request buffer and encoded as the output arrays
themselves: no copy either way.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
"""

from __future__ import annotations

import numpy as np

from edgebox.errors import InvalidArgument
from edgebox.tensors import Tensor, deserialize_bytes, numpy_dtype, serialize_bytes

MAX_RANK = 32
"""Most dimensions a tensor may have: numpy 1.x's own limit (the packaged
build pins numpy<2), well above TensorRT's 8. Checked before anything else
about a shape, so a request's cost to parse never grows with a shape's length."""

MAX_DIMENSION = 2**63 - 1
"""Dimensions are int64, as in Triton and ONNX."""

MAX_SPAN = 2**60 - 1
"""Most elements the non-zero dimensions of a shape may multiply to: numpy
(and Triton's int64 byte sizes) cannot address more of the widest datatype,
even in a tensor that a zero dimension leaves empty."""


def decode_tensor(
    where: str,
    datatype: str,
    shape: list[int],
    count: int,
    raw: memoryview,
    size_field: str = "binary_data_size",
) -> np.ndarray:
    """``count`` elements of ``shape`` (as ``element_count`` checked
    it) from ``raw``; fixed-size types become a view over ``raw``.
    ``size_field`` names what told the size of ``raw`` in the client's message
    (HTTP: ``binary_data_size``; gRPC: the ``raw_input_contents`` entry)."""
    if datatype == "BYTES":
        return _decode_bytes(where, shape, count, raw)
    dtype = numpy_dtype(datatype)
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise InvalidArgument(
            f"{where}: {size_field} is {len(raw)} but shape {shape} of {datatype} "
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


def element_count(where: str, shape) -> int:
    """How many elements ``shape`` (a client's list) describes, or InvalidArgument.

    The rank is checked before any dimension is looked at and each dimension
    before any is multiplied, and the product stops at ``MAX_SPAN``: whatever
    a client sends, this costs at most ``MAX_RANK`` comparisons and
    multiplications of int64-sized numbers. (A plain product of a long list of
    huge integers once held the GIL for tens of seconds.) Whether the count
    fits in the bytes that carry the data is each codec's check.
    """
    if not isinstance(shape, list):
        raise InvalidArgument(
            f"{where}: 'shape' must be a list of non-negative integers, got {type(shape).__name__}"
        )
    if len(shape) > MAX_RANK:
        raise InvalidArgument(
            f"{where}: shape has {len(shape)} dimensions, at most {MAX_RANK} are supported"
        )
    for index, dim in enumerate(shape):
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
            got = "[" + ", ".join(_dim_text(d) for d in shape) + "]"
            raise InvalidArgument(
                f"{where}: 'shape' must be a list of non-negative integers, got {got}"
            )
        if dim > MAX_DIMENSION:
            raise InvalidArgument(
                f"{where}: shape dimension {index} is larger than {MAX_DIMENSION} "
                "(dimensions are int64)"
            )
    span = 1
    empty = False
    for dim in shape:
        if dim == 0:
            empty = True
            continue
        span = span * dim
        if span > MAX_SPAN:
            raise InvalidArgument(f"{where}: shape {shape} spans more than {MAX_SPAN} elements")
    return 0 if empty else span


def _dim_text(dim) -> str:
    """A dimension as an error message shows it: never longer than an int64,
    never a nested structure."""
    if dim is None or isinstance(dim, (bool, float)):
        return repr(dim)
    if isinstance(dim, int):
        return repr(dim) if -MAX_DIMENSION <= dim <= MAX_DIMENSION else "<out of int64 range>"
    return f"<{type(dim).__name__}>"
