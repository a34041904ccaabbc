"""TensorRT engines (``platform: "tensorrt_plan"``) on a Jetson's GPU or DLA cores.

Invariant: CUDA is only ever touched on an instance's own CUDA thread
(``cuda_worker.CudaWorker``); everything else here works on plain data
(``engine_io``, ``profiles``, ``dtypes``, ``placement``, ``compatibility``) and
is tested without TensorRT. TensorRT and pycuda are imported when a
``tensorrt_plan`` model loads, never at import time (``imports``).
"""

from edgebox.backends.tensorrt.backend import Backend

__all__ = ["Backend"]
