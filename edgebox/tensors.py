"""Tensors, requests and responses as every part of edgebox sees them.

No wire format lives here: the HTTP codecs, the python backend and the ensemble
scheduler all meet on these types. A tensor's data is a numpy array, usually a
view over bytes someone else owns (a request body, an ONNX Runtime output), so
nothing in the request path copies tensor data unless it must.

Datatypes use the KServe v2 wire names (``FP32``, ``BYTES``...); config files use
Triton's ``TYPE_*`` names. BYTES tensors hold ``bytes`` objects in an object array.
numpy has no bfloat16, so BF16 tensors carry their raw bits as ``uint16``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_NUMPY_BY_DATATYPE: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
    "BF16": np.dtype(np.uint16),
}

DATATYPES: frozenset[str] = frozenset(_NUMPY_BY_DATATYPE)

_DATATYPE_BY_NUMPY: dict[np.dtype, str] = {
    dtype: name for name, dtype in _NUMPY_BY_DATATYPE.items() if name != "BF16"
}
_DATATYPE_BY_NUMPY[np.dtype(np.bytes_)] = "BYTES"


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype that carries ``datatype``; KeyError for unknown names."""
    return _NUMPY_BY_DATATYPE[datatype]


def datatype_of(array: np.ndarray) -> str | None:
    """The wire datatype for a numpy array, or None when v2 has no such type."""
    dtype = array.dtype
    if dtype.kind in ("S", "U"):
        return "BYTES"
    return _DATATYPE_BY_NUMPY.get(dtype)


def config_type_to_datatype(config_type: str) -> str:
    """``TYPE_FP32`` -> ``FP32``, ``TYPE_STRING`` -> ``BYTES``."""
    name = config_type.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def datatype_to_config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


_LENGTH = struct.Struct("<I")


def serialize_bytes(array: np.ndarray) -> bytes:
    """BYTES elements as Triton lays them out: a 4-byte little-endian length,
    then the bytes, element after element in row-major order."""
    parts = []
    for item in array.ravel():
        value = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def deserialize_bytes(raw, count: int) -> np.ndarray:
    """``count`` length-prefixed elements from ``raw``, as a flat object array;
    ValueError says what is wrong with the layout. Every element takes at least
    its 4-byte length, so a ``count`` that ``raw`` cannot hold is refused before
    the array (8 bytes a slot) is allocated."""
    if count > len(raw) // 4:
        raise ValueError(f"{count} BYTES elements need at least {4 * count} bytes, got {len(raw)}")
    array = np.empty(count, dtype=object)
    offset = 0
    size = len(raw)
    for index in range(count):
        if offset + 4 > size:
            raise ValueError(f"BYTES data ends after {index} of {count} elements")
        (length,) = _LENGTH.unpack_from(raw, offset)
        offset += 4
        if offset + length > size:
            raise ValueError(
                f"BYTES element {index} claims {length} bytes but only {size - offset} remain"
            )
        array[index] = bytes(raw[offset : offset + length])
        offset += length
    if offset != size:
        raise ValueError(f"{size - offset} bytes left over after {count} BYTES elements")
    return array


@dataclass(slots=True)
class Tensor:
    name: str
    datatype: str
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asked for; ``parameters`` keep protocol options
    such as ``binary_data`` and ``classification``."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class InferRequest:
    """One inference request. ``model_version`` is "" for the default version.

    ``outputs`` empty means every output of the model. ``inputs`` keep the
    client's order.

    Input arrays belong to the request, but a read-only one is also read by
    someone else (an ensemble's other steps, a BLS caller): whoever would write
    into it writes into a copy.
    """

    model_name: str
    inputs: list[Tensor]
    model_version: str = ""
    id: str = ""
    outputs: list[RequestedOutput] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    is_cancelled: Callable[[], bool] | None = None
    """True once nobody waits for the answer (the client hung up). Set by the
    transport; called from any thread, under scheduler locks, so it must be
    quick and never block. Schedulers skip such a request when it leaves their
    queue rather than run it. None: never cancelled."""

    def input(self, name: str) -> Tensor | None:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        return None

    def cancelled(self) -> bool:
        """The hook's answer; a hook that raises counts as not cancelled, so a
        transport's fault never stops a scheduler."""
        if self.is_cancelled is None:
            return False
        try:
            return bool(self.is_cancelled())
        except Exception:
            return False


@dataclass(slots=True)
class InferResponse:
    model_name: str
    model_version: str
    outputs: list[Tensor]
    id: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)

    def output(self, name: str) -> Tensor | None:
        for tensor in self.outputs:
            if tensor.name == name:
                return tensor
        return None
