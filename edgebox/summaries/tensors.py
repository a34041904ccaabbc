"""The ``tensors`` rule, and the pieces other rules reuse: small outputs
whole (as nested lists), large ones only by datatype and shape, so a result
stays a few kilobytes whatever the model returns.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgebox.tensors import Tensor

SMALL_OUTPUT_ELEMENTS = 64
"""Outputs with at most this many elements are included whole."""


class SummaryError(Exception):
    """The outputs contradict themselves or the rule (e.g. lane counts vs points)."""


def summarize_tensors(outputs: list[Tensor]) -> dict[str, Any]:
    return {tensor.name: tensor_summary(tensor) for tensor in outputs}


def tensor_summary(tensor: Tensor) -> Any:
    data = tensor.data
    if data.size > SMALL_OUTPUT_ELEMENTS:
        return {"datatype": tensor.datatype, "shape": list(data.shape)}
    return _to_list(data)


def full_tensor(tensor: Tensor) -> Any:
    """Every element, for a model whose config asks for its outputs whole."""
    return _to_list(tensor.data)


def _to_list(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        if data.ndim == 0:
            return _scalar(data[()])
        return [_to_list(item) for item in data]
    return _scalar(data)


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.floating):
        # str() gives float32's shortest repr (0.1, not 0.10000000149011612).
        number = float(str(value))
        return number if math.isfinite(number) else None
    if isinstance(value, np.generic):
        return value.item()
    return value
