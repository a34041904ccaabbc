"""Tensors as JSON ``data`` arrays (KServe v2): row-major, flat or nested.

FP16 survives JSON only approximately; BF16 goes through float32; BYTES
elements are UTF-8 strings (binary data is the way to send arbitrary bytes).
"""

from __future__ import annotations

import numpy as np

from edgebox.errors import InvalidArgument
from edgebox.tensors import Tensor, numpy_dtype


def decode_tensor(where: str, datatype: str, shape: list[int], count: int, data) -> np.ndarray:
    """``count`` elements of ``shape`` (as ``tensor_codec.element_count`` checked
    it) from a JSON ``data`` value; nothing is allocated for ``count`` before
    ``data`` is seen to hold that many elements."""
    if datatype == "BYTES":
        flat = _flatten(data)
        if len(flat) != count:
            raise InvalidArgument(
                f"{where}: 'data' holds {len(flat)} elements, shape {shape} needs {count}"
            )
        array = np.empty(count, dtype=object)
        for index, item in enumerate(flat):
            if not isinstance(item, str):
                raise InvalidArgument(
                    f"{where}: BYTES data must be strings in JSON, got {type(item).__name__} "
                    f"{item!r}"
                )
            try:
                array[index] = item.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgument(
                    f"{where}: BYTES element {index} is not valid Unicode text (it holds a "
                    "lone surrogate); send arbitrary bytes as binary data"
                ) from None
        return array.reshape(shape)
    dtype = np.dtype(np.float32) if datatype == "BF16" else numpy_dtype(datatype)
    if dtype.kind in "biu":
        _check_integral(where, datatype, data)
    try:
        array = np.asarray(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidArgument(f"{where}: 'data' does not hold {datatype} values ({exc})") from None
    if array.size != count:
        raise InvalidArgument(
            f"{where}: 'data' holds {array.size} elements, shape {shape} needs {count}"
        )
    array = array.reshape(shape)
    if datatype == "BF16":
        array = _float32_to_bf16_bits(array)
    return array


def encode_tensor(where: str, tensor: Tensor) -> list:
    data = tensor.data
    if tensor.datatype == "BYTES":
        out = []
        for item in data.ravel():
            if isinstance(item, bytes):
                try:
                    out.append(item.decode("utf-8"))
                except UnicodeDecodeError:
                    raise InvalidArgument(
                        f"{where}, output '{tensor.name}': holds bytes that are not UTF-8; "
                        "request it with binary_data"
                    ) from None
            else:
                out.append(str(item))
        return out
    if tensor.datatype == "BF16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return data.ravel().tolist()


def _check_integral(where: str, datatype: str, data) -> None:
    """numpy would turn 1.5 into 1 and "2" into 2 without a word; Triton refuses them."""
    want_bool = datatype == "BOOL"
    for item in _flatten(data):
        if isinstance(item, bool) != want_bool or not isinstance(item, int):
            kind = "booleans" if want_bool else "integers"
            raise InvalidArgument(
                f"{where}: {datatype} data must be {kind} in JSON, got {type(item).__name__} "
                f"{item!r}"
            )


def _float32_to_bf16_bits(array: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def _flatten(data) -> list:
    if not isinstance(data, list):
        return [data]
    flat: list = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat
