"""TensorRT and pycuda come from JetPack, not from PyPI.

Both are imported only when something needs them (a ``tensorrt_plan`` model
loading, ``edgebox build-engine``), so a machine without them serves every other
model and says precisely what is missing.
"""

from __future__ import annotations

from types import ModuleType

from edgebox.errors import Unavailable


def import_tensorrt() -> ModuleType:
    try:
        import tensorrt
    except ImportError as exc:
        raise Unavailable(
            f"TensorRT is not installed ({exc}); on a Jetson it comes with JetPack "
            "(python3-libnvinfer)"
        ) from None
    return tensorrt


def import_pycuda_driver() -> ModuleType:
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        raise Unavailable(
            f"pycuda is not installed ({exc}); on a Jetson install it with "
            "'pip install pycuda' with CUDA on PATH (export PATH=/usr/local/cuda/bin:$PATH)"
        ) from None
    return cuda
