"""A dynamic batch run as one call: the requests' inputs stacked along the
batch dimension, the outputs split back into each request's rows.

Backends whose runtime takes a whole batch at once (ONNX Runtime, TensorRT)
share this rule, so they agree on which requests may stack and on the error
for an output that lost its batch dimension. The rows handed back are views
into the merged outputs, not copies: each response owns its slice, and no
one writes the merged array again (``base.py``, "Tensors change hands").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from edgebox.errors import EdgeboxError
from edgebox.tensors import InferRequest


def stackable(requests: Sequence[InferRequest]) -> bool:
    """Same inputs, datatypes and shapes apart from the batch dimension."""

    def layout(request: InferRequest) -> list:
        return sorted((t.name, t.datatype, t.data.shape[1:]) for t in request.inputs)

    first = layout(requests[0])
    return all(t.data.ndim > 0 for t in requests[0].inputs) and all(
        layout(r) == first for r in requests[1:]
    )


def stack_inputs(requests: Sequence[InferRequest]) -> dict[str, np.ndarray]:
    """Each input of the first request, concatenated over every request, in
    that request's input order; the requests must be ``stackable``."""
    return {
        t.name: np.concatenate([r.input(t.name).data for r in requests]) for t in requests[0].inputs
    }


def split_rows(
    where: str, outputs: Mapping[str, np.ndarray], requests: Sequence[InferRequest]
) -> list[dict[str, np.ndarray]]:
    """Each request's rows of ``outputs``, in request order. EdgeboxError
    when an output does not start with the batch's size: the runtime broke
    the batch, and no request can be told which rows are its own."""
    sizes = [request.inputs[0].data.shape[0] for request in requests]
    total = sum(sizes)
    for name, array in outputs.items():
        if array.ndim == 0 or array.shape[0] != total:
            raise EdgeboxError(
                f"{where}: output '{name}' has shape {list(array.shape)}, which does not "
                f"start with the batch size {total}"
            )
    rows = []
    start = 0
    for size in sizes:
        rows.append({name: array[start : start + size] for name, array in outputs.items()})
        start += size
    return rows
