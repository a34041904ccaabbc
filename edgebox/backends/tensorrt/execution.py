"""One deserialized engine running on its instance's CUDA thread.

A run is: pick the optimization profile the input shapes fit, set the input
shapes, copy inputs into page-locked buffers and on to the GPU asynchronously,
point TensorRT at every input and output buffer (``set_tensor_address``),
``execute_async_v3`` on the instance's stream, copy the wanted outputs back
asynchronously, and wait for the stream once. Every method checks it runs on
the owning ``CudaWorker`` thread, so no code path can touch this engine's
CUDA state from another thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from edgebox.backends.tensorrt.bindings import TensorBuffers
from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.backends.tensorrt.dtypes import buffer_dtype
from edgebox.backends.tensorrt.engine_io import EngineIO, dims
from edgebox.backends.tensorrt.profiles import choose_profile, no_profile_message
from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable, Unsupported


class NoProfileFits(InvalidArgument):
    """The shapes fit none of the instance's profiles (a merged batch may still
    run request by request)."""


class EngineExecution:
    """Owned by one CudaWorker; create and use it only through ``worker.call``."""

    def __init__(self, trt, cuda, worker: CudaWorker, runtime, engine, io: EngineIO) -> None:
        self._trt = trt
        self._cuda = cuda
        self._worker = worker
        # TensorRT requires the runtime to outlive the engine it deserialized.
        self._runtime = runtime
        self._engine = engine
        self.io = io
        self._context = None
        self._stream = None
        self._buffers = TensorBuffers(cuda)
        self._allowed: list[int] = [0]
        self._active: int | None = None

    def prepare(self, allowed_profiles: Sequence[int]) -> None:
        """Create the execution context and stream; the instance may use
        ``allowed_profiles`` (engine profile indices)."""
        self._worker.check_owner()
        context = self._engine.create_execution_context()
        if context is None:
            raise Unavailable("TensorRT could not create an execution context (out of GPU memory?)")
        self._context = context
        self._stream = self._cuda.Stream()
        self._allowed = list(allowed_profiles)
        self._active = 0

    def run(self, feeds: Mapping[str, np.ndarray], wanted: Sequence[str]) -> dict[str, np.ndarray]:
        """Execute once; returns the ``wanted`` outputs as arrays the caller owns."""
        self._worker.check_owner()
        context, stream = self._context, self._stream
        if context is None:
            raise Unavailable("the engine was released")
        shapes = {t.name: tuple(feeds[t.name].shape) for t in self.io.inputs if t.name in feeds}
        missing = [t.name for t in self.io.inputs if t.name not in feeds]
        if missing:
            raise InvalidArgument("missing input(s) " + ", ".join(f"'{n}'" for n in missing))
        profile = choose_profile(self.io.profiles, shapes, self._allowed, self._active)
        if profile is None:
            raise NoProfileFits(no_profile_message(self.io.profiles, shapes, self._allowed))
        if profile != self._active:
            if not context.set_optimization_profile_async(profile, stream.handle):
                raise EdgeboxError(f"TensorRT refused to switch to optimization profile {profile}")
            self._active = profile

        for tensor in self.io.inputs:
            array = feeds[tensor.name]
            dtype = buffer_dtype(tensor.config_type)
            if array.dtype != dtype:
                raise InvalidArgument(
                    f"input '{tensor.name}': expected {dtype.name} data, got {array.dtype.name}"
                )
            if not context.set_input_shape(tensor.name, tuple(array.shape)):
                raise InvalidArgument(
                    f"input '{tensor.name}': TensorRT rejected shape {list(array.shape)}"
                )
            buffer = self._buffers.get(tensor.name, array.nbytes)
            if array.nbytes:
                np.copyto(buffer.host_view(array.nbytes, dtype, array.shape), array)
                self._cuda.memcpy_htod_async(buffer.device, buffer.host[: array.nbytes], stream)
            context.set_tensor_address(tensor.name, int(buffer.device))

        layouts: dict[str, tuple[tuple[int, ...], np.dtype, int]] = {}
        for tensor in self.io.outputs:
            shape = dims(context.get_tensor_shape(tensor.name))
            if any(d < 0 for d in shape):
                raise Unsupported(
                    f"output '{tensor.name}' has a data-dependent shape {list(shape)}, which "
                    "edgebox does not support yet"
                )
            dtype = buffer_dtype(tensor.config_type)
            nbytes = math.prod(shape) * dtype.itemsize
            buffer = self._buffers.get(tensor.name, nbytes)
            context.set_tensor_address(tensor.name, int(buffer.device))
            layouts[tensor.name] = (shape, dtype, nbytes)

        if not context.execute_async_v3(stream.handle):
            raise EdgeboxError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        for name in wanted:
            shape, dtype, nbytes = layouts[name]
            if nbytes:
                buffer = self._buffers.get(name, nbytes)
                self._cuda.memcpy_dtoh_async(buffer.host[:nbytes], buffer.device, stream)
        stream.synchronize()
        results = {}
        for name in wanted:
            shape, dtype, nbytes = layouts[name]
            results[name] = self._buffers.get(name, nbytes).host_view(nbytes, dtype, shape).copy()
        return results

    def release(self) -> None:
        """Free buffers and drop TensorRT objects while the context is still
        current; the worker pops it afterwards."""
        self._worker.check_owner()
        if self._stream is not None:
            self._stream.synchronize()
        self._buffers.free_all()
        self._context = None
        self._stream = None
        self._engine = None
        self._runtime = None
