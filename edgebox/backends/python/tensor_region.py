"""Shared memory that tensors travel through between the daemon and an
isolated python model's process, and the layout of tensors inside it.

A region is an anonymous ``memfd`` (``os.memfd_create``), never a file in
``/dev/shm``: it has no name, so a process that is killed cannot leak one, and
the kernel frees it once the last descriptor and mapping are gone. Each
direction has its own region with one writer: the daemon writes inputs, the
child writes outputs. The writer grows the region (``ftruncate``) when a
request needs more room than it has; the reader maps the larger size when a
message says the tensors reach past its mapping. Regions never shrink, so a
model's steady state costs no system calls beyond the copies.

Layout: tensors back to back, each at a 64-byte aligned offset, described in
the control message by name, datatype, shape, offset and byte count. BYTES
tensors are stored as Triton serializes them (a 4-byte little-endian length
before each element). The same functions lay tensors out in a plain
``bytearray`` for the few messages that carry tensors inline (BLS calls).
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgebox.tensors import DATATYPES, Tensor, deserialize_bytes, numpy_dtype, serialize_bytes

ALIGNMENT = 64
INITIAL_BYTES = 1 << 20
"""A region's first size: most pre/post-processing tensors fit without growing."""


class TensorRegion:
    """One memfd and this process's mapping of it. Not thread-safe: one
    request at a time uses an instance's regions."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map: mmap.mmap | None = None

    @classmethod
    def create(cls, name: str, size: int = INITIAL_BYTES) -> TensorRegion:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, _page_rounded(size))
        except OSError:
            os.close(fd)
            raise
        return cls(fd)

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def writable(self, needed: int) -> mmap.mmap:
        """The mapping, grown first when ``needed`` bytes do not fit (to twice
        the need, so a slowly growing tensor does not resize every request)."""
        if self._map is None or len(self._map) < needed:
            if self.size < needed:
                os.ftruncate(self.fd, _page_rounded(2 * needed))
            self._remap()
        return self._map

    def readable(self, needed: int) -> mmap.mmap:
        """The mapping, remapped when the writer has grown the region past it;
        ValueError when even the region is too small (a corrupt message)."""
        if self._map is None or len(self._map) < needed:
            if self.size < needed:
                raise ValueError(f"tensors reach byte {needed} of a {self.size}-byte region")
            self._remap()
        return self._map

    def _remap(self) -> None:
        # An old mapping still exported to arrays is left to them: it is
        # unmapped when the last of them is collected.
        self._map = mmap.mmap(self.fd, self.size)

    def close(self) -> None:
        self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def layout(tensors: Sequence[Tensor], start: int = 0) -> tuple[list[dict], list[Any], int]:
    """Where each tensor goes: (descriptors, the data to write for each, end).
    BYTES tensors are serialized here; numeric arrays are written as they
    are, strided or not, by ``write``."""
    descriptors: list[dict] = []
    sources: list[Any] = []
    offset = start
    for tensor in tensors:
        offset = _aligned(offset)
        if tensor.datatype == "BYTES":
            data: Any = serialize_bytes(tensor.data)
            nbytes = len(data)
        else:
            data = tensor.data
            nbytes = data.nbytes
        descriptors.append(
            {
                "name": tensor.name,
                "datatype": tensor.datatype,
                "shape": [int(dim) for dim in tensor.data.shape],
                "offset": offset,
                "nbytes": nbytes,
            }
        )
        sources.append(data)
        offset += nbytes
    return descriptors, sources, offset


def write(buffer: Any, descriptors: Sequence[dict], sources: Sequence[Any]) -> None:
    """Copy each source into ``buffer`` (a writable mapping or bytearray) at
    its descriptor's place: the one copy a tensor costs on the way in."""
    for descriptor, source in zip(descriptors, sources, strict=True):
        offset, nbytes = descriptor["offset"], descriptor["nbytes"]
        if not nbytes:
            continue
        if isinstance(source, bytes):
            buffer[offset : offset + nbytes] = source
            continue
        target = np.frombuffer(buffer, dtype=source.dtype, count=source.size, offset=offset)
        np.copyto(target.reshape(source.shape), source, casting="no")


def read(buffer: Any, descriptor: dict, copy: bool) -> Tensor:
    """The tensor a descriptor names: a view into ``buffer`` (``copy`` False)
    or an array of its own. ValueError for a descriptor that does not fit
    the buffer or its own datatype and shape.

    ``buffer`` may be a uint8 array over the region: views are then made from
    it and keep it as their ``base``, so its reference count tells whether
    any of them is still alive."""
    name, datatype, shape = descriptor["name"], descriptor["datatype"], descriptor["shape"]
    offset, nbytes = int(descriptor["offset"]), int(descriptor["nbytes"])
    if datatype not in DATATYPES:
        raise ValueError(f"tensor '{name}': unknown datatype '{datatype}'")
    if not all(isinstance(dim, int) and dim >= 0 for dim in shape):
        raise ValueError(f"tensor '{name}': bad shape {shape}")
    if offset < 0 or nbytes < 0 or offset + nbytes > len(buffer):
        raise ValueError(
            f"tensor '{name}': bytes {offset}..{offset + nbytes} lie outside the "
            f"{len(buffer)}-byte buffer"
        )
    count = math.prod(shape)
    if datatype == "BYTES":
        raw = memoryview(buffer)[offset : offset + nbytes]
        try:
            array = deserialize_bytes(raw, count).reshape(shape)
        finally:
            raw.release()
        return Tensor(name, datatype, array)
    dtype = numpy_dtype(datatype)
    if nbytes != count * dtype.itemsize:
        raise ValueError(f"tensor '{name}': {nbytes} bytes for {count} {datatype} elements")
    if not count:
        return Tensor(name, datatype, np.empty(shape, dtype))
    if isinstance(buffer, np.ndarray):
        array = buffer[offset : offset + nbytes].view(dtype).reshape(shape)
    else:
        array = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
    return Tensor(name, datatype, array.copy() if copy else array)


def _aligned(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT


def _page_rounded(size: int) -> int:
    page = mmap.PAGESIZE
    return max(page, -(-size // page) * page)
