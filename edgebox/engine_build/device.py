"""The GPU a build runs on, through pycuda's driver module (handed in, so
tests pass a fake one).

The build runs with the device's primary CUDA context current: it is the
context TensorRT's runtime calls use, so the calibration buffers pycuda
allocates are valid for TensorRT without a second context. pycuda's
``autoinit`` would create a separate context instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from edgebox.backends.tensorrt.compatibility import DeviceInfo
from edgebox.errors import Unavailable

DEVICE_ID = 0
"""Jetson modules have one integrated GPU."""


def read_device(cuda: ModuleType | Any, device_id: int = DEVICE_ID) -> DeviceInfo:
    """Unavailable when CUDA finds no usable device (no driver, no GPU)."""
    try:
        cuda.init()
        device = cuda.Device(device_id)
        major, minor = device.compute_capability()
        name = device.name()
    except Exception as exc:  # pycuda raises its own error types per driver status
        raise Unavailable(f"CUDA device {device_id} is not usable: {exc}") from None
    return DeviceInfo(name=str(name), compute_capability=f"{major}.{minor}")


@contextmanager
def device_context(cuda: ModuleType | Any, device_id: int = DEVICE_ID) -> Iterator[None]:
    """The device's primary context, current on this thread for the block."""
    context = cuda.Device(device_id).retain_primary_context()
    context.push()
    try:
        yield
    finally:
        context.pop()
        context.detach()
