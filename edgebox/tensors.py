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


def element_size(datatype: str) -> int:
    """Bytes per element for fixed-size datatypes; 0 for BYTES."""
    if datatype == "BYTES":
        return 0
    return _NUMPY_BY_DATATYPE[datatype].itemsize


def config_type_to_datatype(config_type: str) -> str:
    """``TYPE_FP32`` -> ``FP32``, ``TYPE_STRING`` -> ``BYTES``."""
    name = config_type.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def datatype_to_config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


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
    """

    model_name: str
    inputs: list[Tensor]
    model_version: str = ""
    id: str = ""
    outputs: list[RequestedOutput] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)

    def input(self, name: str) -> Tensor | None:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        return None


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
