"""The thread that owns one instance's CUDA context.

A CUDA context is current on one thread at a time, and pycuda objects
(allocations, streams) act on whatever context is current on the calling
thread. Calling them from an HTTP or batcher thread is the classic pycuda
"invalid device context - no currently active context?" failure, and an
unbalanced push/pop aborts the process at exit. So each instance gets a
``CudaWorker``: its thread retains the device's primary context and pushes it,
runs every task handed to it (deserializing, allocating, executing, freeing),
and at the end pops and detaches the context itself. Other threads never touch
CUDA; they ``call()`` a function on the worker and wait for its result.

The primary context is shared with everything else on the device (ONNX
Runtime's CUDA provider, other instances), as Triton shares it, so instances
cost no extra context memory on a Jetson. Tasks run one at a time, in order;
the queue is unbounded but holds at most one execute per instance (callers
serialize on the instance, see ``backends/base.py``) plus control tasks.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from edgebox.backends.tensorrt.compatibility import DeviceInfo
from edgebox.errors import Unavailable, one_line

log = logging.getLogger(__name__)

T = TypeVar("T")

_STOP = object()


class CudaWorker:
    """Owns its thread and the context pushed on it. ``call`` and ``close`` may
    be called from any thread; ``close`` once, after the last ``call``."""

    def __init__(self, cuda, device_id: int, name: str) -> None:
        self._cuda = cuda
        self._device_id = device_id
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> DeviceInfo:
        """Start the thread and make the context current on it; Unavailable
        when there is no usable GPU (the thread has ended by then)."""
        ready: Future[DeviceInfo] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"cuda-{self.name}", daemon=True
        )
        self._thread.start()
        try:
            return ready.result()
        except BaseException:
            self._thread.join()
            with self._lock:
                self._closed = True
            raise

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on the worker thread and return its result
        (or raise its exception)."""
        if self.on_worker_thread():
            return function(*args)
        future: Future[T] = Future()
        with self._lock:
            if self._closed or self._thread is None:
                raise Unavailable(f"instance '{self.name}' is closed")
            self._tasks.put((function, args, future))
        return future.result()

    def on_worker_thread(self) -> bool:
        thread = self._thread
        return thread is not None and threading.get_ident() == thread.ident

    def check_owner(self) -> None:
        """Raise unless called on the worker thread: how CUDA-touching code
        proves it never runs anywhere else."""
        if not self.on_worker_thread():
            raise RuntimeError(
                f"CUDA work for '{self.name}' called on thread "
                f"'{threading.current_thread().name}', not on its owning thread"
            )

    def close(self, teardown: Callable[[], None] | None = None) -> None:
        """Run ``teardown`` on the worker (with the context current), then pop
        and detach the context there and end the thread."""
        with self._lock:
            if self._closed or self._thread is None:
                self._closed = True
                return
            self._closed = True
            if teardown is not None:
                self._tasks.put((_logged(teardown, self.name), (), Future()))
            self._tasks.put(_STOP)
        if not self.on_worker_thread():
            self._thread.join()

    def _run(self, ready: Future) -> None:
        try:
            context, info = self._open_context()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(info)
        try:
            self._serve()
        finally:
            try:
                context.pop()
            finally:
                context.detach()

    def _open_context(self):
        cuda = self._cuda
        try:
            cuda.init()
            count = cuda.Device.count()
        except Exception as exc:
            raise Unavailable(f"no usable CUDA GPU: {one_line(exc)}") from None
        if count == 0:
            raise Unavailable("no CUDA GPU is visible to this process")
        if not 0 <= self._device_id < count:
            raise Unavailable(
                f"GPU {self._device_id} does not exist (this machine has {count} CUDA GPU(s))"
            )
        try:
            device = cuda.Device(self._device_id)
            context = device.retain_primary_context()
            context.push()
        except Exception as exc:
            raise Unavailable(
                f"cannot make a CUDA context on GPU {self._device_id}: {one_line(exc)}"
            ) from None
        try:
            major, minor = device.compute_capability()
            info = DeviceInfo(str(device.name()), f"{major}.{minor}")
        except BaseException:
            try:
                context.pop()
            finally:
                context.detach()
            raise
        return context, info

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            if task is _STOP:
                return
            function, args, future = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = function(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


def _logged(teardown: Callable[[], None], name: str) -> Callable[[], None]:
    def run() -> None:
        try:
            teardown()
        except Exception:
            log.exception("instance '%s': releasing its CUDA resources failed", name)

    return run
