"""Which outputs a python model may still hold, so that only those are
copied before their response leaves.

Triton lets a model reuse an output buffer on its next call; the response
still being encoded and sent must not change under it (``base.py``: the
arrays ``execute`` returns belong to their responses). Copying every output
would cost a copy per answer, so ownership is read from reference counts: an
output nothing outside the returned list can reach is passed on as is. The
counts a free output has are measured on this interpreter at import
(``_calibrate_reference_counts``), never assumed; where they cannot be
measured, every output is copied.
"""

from __future__ import annotations

import sys

import numpy as np

from edgebox.backends.python import triton_python_backend_utils as pb_utils

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # numpy < 2.0
    from numpy import byte_bounds


class _Everything:
    """A set of ids that holds every id."""

    def __contains__(self, item: object) -> bool:
        return True


ALL = _Everything()
"""Every output held: for a decoupled model, whose outputs are always copied."""


def reference_counts(returned: list) -> list[tuple[pb_utils.Tensor, tuple[int, ...]]]:
    """Each output tensor with ``sys.getrefcount`` of every object between
    ``returned`` and the output's memory: the list, the response, its tensor
    list, the tensor, the array and the array that owns the memory (-1 when the
    array owns it). A count above the calibrated one means something outside
    that chain holds a way to the memory. Types other than pb_utils' own and
    memory not owned by a numpy array give counts of 1 << 30: always held.
    The caller passes its own one reference to ``returned``, as the
    calibration does: one more frame or name in between shifts every count."""
    unknown = 1 << 30
    counted = []
    returned_count = sys.getrefcount(returned)
    for response in returned:
        if type(response) is not pb_utils.InferenceResponse:
            continue
        response_count = sys.getrefcount(response)
        tensors = response._output_tensors
        tensors_count = sys.getrefcount(tensors)
        for tensor in tensors:
            if type(tensor) is not pb_utils.Tensor or type(tensor._array) is not np.ndarray:
                counted.append((tensor, (unknown,)))
                continue
            array = tensor._array
            base = array.base
            if base is None:
                base_count = -1 if array.flags.owndata else unknown
            elif type(base) is np.ndarray and base.base is None and base.flags.owndata:
                base_count = sys.getrefcount(base)
            else:
                base_count = unknown
            counts = (
                returned_count,
                response_count,
                tensors_count,
                sys.getrefcount(tensor),
                sys.getrefcount(array),
                base_count,
            )
            counted.append((tensor, counts))
    return counted


def _calibrate_reference_counts() -> tuple[int, ...] | None:
    """The counts ``reference_counts`` sees for outputs nothing else holds,
    measured on this interpreter rather than assumed (they differ between
    Python versions). None, so that every output is copied, unless a fresh
    array and a fresh view measure alike and one more reference to any link
    of the chain shows in its count."""

    def fresh(array: np.ndarray) -> list:
        return [pb_utils.InferenceResponse([pb_utils.Tensor("x", array)])]

    def chain(returned: list) -> list:
        response = returned[0]
        tensor = response._output_tensors[0]
        return [returned, response, response._output_tensors, tensor, tensor._array]

    returned = fresh(np.empty(4)[1:])
    ((_, limits),) = reference_counts(returned)
    returned = fresh(np.empty(4))
    ((_, counts),) = reference_counts(returned)
    if counts[:5] != limits[:5] or counts[5] != -1:
        return None
    for index in range(6):
        returned = fresh(np.empty(4)[1:])
        extra = chain(returned)[index] if index < 5 else returned[0]._output_tensors[0]._array.base
        ((_, counts),) = reference_counts(returned)
        del extra
        if counts[index] <= limits[index]:
            return None
    return limits


def held_outputs(counted: list[tuple[pb_utils.Tensor, tuple[int, ...]]]) -> set[int]:
    """ids of the output tensors whose memory something besides the returned
    list may reach: the model (a reused buffer, a kept tensor or response),
    another output, or memory no numpy array owns."""
    limits = _REFERENCE_COUNT_LIMITS
    held = set()
    for tensor, counts in counted:
        if (
            limits is None
            or len(counts) != len(limits)
            or any(count > limit for count, limit in zip(counts, limits, strict=True))
        ):
            held.add(id(tensor))
    return held


def inside_any(array: np.ndarray, owners: list[np.ndarray]) -> bool:
    """Whether ``array``'s memory lies within one of ``owners``' (the
    request's own inputs, which live as long as the request)."""
    low, high = byte_bounds(array)
    for owner in owners:
        owner_low, owner_high = byte_bounds(owner)
        if owner_low <= low and high <= owner_high:
            return True
    return False


_REFERENCE_COUNT_LIMITS = _calibrate_reference_counts()
