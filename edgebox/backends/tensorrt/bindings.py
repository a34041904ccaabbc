"""Host and device memory for an engine's I/O tensors.

Each tensor gets a page-locked host buffer (so copies to and from the GPU can
be asynchronous on the instance's stream) and a device buffer of the same
size. Buffers grow to the largest request seen (rounded up to a power of two)
and are reused; they never shrink. Everything here runs on the instance's
CUDA thread: allocations belong to the context current there, and ``free_all``
must run there too, before the context is popped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MIN_BYTES = 256


@dataclass
class TensorBuffer:
    host: np.ndarray
    """Flat ``uint8`` page-locked memory; typed views are taken per request."""
    device: object
    """A pycuda ``DeviceAllocation``; ``int(device)`` is its address."""
    capacity: int

    def host_view(self, nbytes: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        return self.host[:nbytes].view(dtype).reshape(shape)


class TensorBuffers:
    def __init__(self, cuda) -> None:
        self._cuda = cuda
        self._buffers: dict[str, TensorBuffer] = {}

    def get(self, name: str, nbytes: int) -> TensorBuffer:
        """A buffer for ``name`` holding at least ``nbytes``, grown if needed
        (the old one is freed: only call between executions)."""
        buffer = self._buffers.get(name)
        if buffer is not None and buffer.capacity >= nbytes:
            return buffer
        capacity = _capacity_for(nbytes)
        host = self._cuda.pagelocked_empty((capacity,), np.uint8)
        try:
            device = self._cuda.mem_alloc(capacity)
        except BaseException:
            _free_host(host)
            raise
        if buffer is not None:
            _free(buffer)
        buffer = TensorBuffer(host, device, capacity)
        self._buffers[name] = buffer
        return buffer

    def free_all(self) -> None:
        buffers, self._buffers = self._buffers, {}
        for buffer in buffers.values():
            _free(buffer)


def _capacity_for(nbytes: int) -> int:
    capacity = _MIN_BYTES
    while capacity < nbytes:
        capacity *= 2
    return capacity


def _free(buffer: TensorBuffer) -> None:
    try:
        buffer.device.free()
    finally:
        _free_host(buffer.host)


def _free_host(host: np.ndarray) -> None:
    allocation = host.base
    free = getattr(allocation, "free", None)
    if free is not None:
        free()
