"""A tensor a config gives by value: warm-up inputs and a sequence state's
``initial_state`` are either zeros (``zero_data``, or no value at all) or a
file (``input_data_file``, ``data_file``), made the one way both need.

For a file, the caller has already resolved the path inside the model folder. Here the
file must be a regular file of exactly the bytes ``shape`` of ``datatype``
takes (for BYTES, Triton's length-prefixed layout of at most
``MAX_BYTES_FILE``), checked before a byte is read, so neither ``/dev/zero``
nor a huge file is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgebox.errors import EdgeboxError, Unavailable
from edgebox.repository.contained_path import FileTooLarge, read_regular_file
from edgebox.tensors import deserialize_bytes, numpy_dtype

MAX_BYTES_FILE = 64 * 1024 * 1024
"""Largest BYTES tensor file read (a numeric one must be exactly its shape's size)."""


def zeros(datatype: str, shape: list[int]) -> np.ndarray:
    """Zeros of ``datatype``; BYTES elements are empty byte strings, as
    Triton's ``zero_data`` gives them."""
    if datatype == "BYTES":
        data = np.empty(shape, dtype=object)
        data.fill(b"")
        return data
    return np.zeros(shape, dtype=numpy_dtype(datatype))


def read_tensor_file(
    path: Path,
    datatype: str,
    shape: list[int],
    where: str,
    invalid: type[EdgeboxError] = Unavailable,
    missing: str | None = None,
) -> np.ndarray:
    """The tensor in ``path``, a read-only view over its bytes (BYTES: an
    object array). A file that cannot be opened is Unavailable (``missing``,
    when given, is the message for one that does not exist); a file of the
    wrong kind, size or layout raises ``invalid``."""
    count = int(np.prod(shape, dtype=np.int64))
    needed = MAX_BYTES_FILE if datatype == "BYTES" else count * numpy_dtype(datatype).itemsize
    try:
        raw = read_regular_file(path, needed)
    except FileNotFoundError as exc:
        if missing is not None:
            raise Unavailable(f"{where}: {missing}") from None
        raise Unavailable(f"{where}: cannot read '{path}': {exc.strerror}") from None
    except OSError as exc:
        raise Unavailable(f"{where}: cannot read '{path}': {exc.strerror}") from None
    except FileTooLarge as exc:
        if datatype == "BYTES":
            raise invalid(f"{where}: '{path}' {exc}") from None
        raw_size = exc.size
    except ValueError as exc:
        raise invalid(f"{where}: '{path}' {exc}") from None
    else:
        raw_size = len(raw)
    if datatype == "BYTES":
        try:
            return deserialize_bytes(raw, count).reshape(shape)
        except ValueError as exc:
            raise invalid(f"{where}: '{path}': {exc}") from None
    if raw_size != needed:
        raise invalid(
            f"{where}: '{path}' holds {raw_size} bytes, shape {shape} of {datatype} needs {needed}"
        )
    return np.frombuffer(raw, dtype=numpy_dtype(datatype)).reshape(shape)
