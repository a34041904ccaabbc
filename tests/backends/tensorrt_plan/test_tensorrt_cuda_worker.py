"""The thread that owns an instance's CUDA context: the context is retained,
pushed, popped and detached on that thread only, in balance; work handed in
from other threads runs there; no usable GPU is a reason, not a crash.
``FakePycudaDriver`` refuses CUDA calls on a thread without a current context,
exactly where real pycuda says "invalid device context"."""

from __future__ import annotations

import threading

import pytest

from edgebox.backends.tensorrt.cuda_worker import CudaWorker
from edgebox.errors import Unavailable
from fakes.fake_tensorrt_runtime import NO_CONTEXT, FakeCudaError, FakePycudaDriver


def context_events(cuda: FakePycudaDriver) -> list[tuple[str, ...]]:
    return [e for e in cuda.events if e[1] in ("retain", "push", "pop", "detach")]


def test_context_lives_and_dies_on_the_workers_thread() -> None:
    cuda = FakePycudaDriver(device_name="Orin", compute_capability=(8, 7))
    worker = CudaWorker(cuda, 0, "lane_0")
    device = worker.start()
    assert (device.name, device.compute_capability) == ("Orin", "8.7")
    worker.close()
    assert context_events(cuda) == [
        ("cuda-lane_0", "retain", "0"),
        ("cuda-lane_0", "push", "0"),
        ("cuda-lane_0", "pop", "0"),
        ("cuda-lane_0", "detach", "0"),
    ]
    assert cuda.retained == 0


def test_work_from_another_thread_runs_on_the_worker_with_its_context() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    try:
        allocation = worker.call(cuda.mem_alloc, 64)
        ran_on = worker.call(lambda: threading.current_thread().name)
    finally:
        worker.close(teardown=allocation.free)
    assert ran_on == "cuda-lane_0"
    assert allocation.freed
    assert ("cuda-lane_0", "free", "64") in cuda.events


def test_the_same_call_off_the_worker_fails_as_pycuda_would() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    try:
        with pytest.raises(FakeCudaError, match=NO_CONTEXT):
            cuda.mem_alloc(64)
    finally:
        worker.close()


def test_exceptions_come_back_to_the_caller_and_the_worker_goes_on() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    try:
        with pytest.raises(ZeroDivisionError):
            worker.call(lambda: 1 / 0)
        assert worker.call(lambda: 42) == 42
    finally:
        worker.close()


def test_check_owner_refuses_other_threads() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    try:
        worker.call(worker.check_owner)
        with pytest.raises(RuntimeError, match="not on its owning thread"):
            worker.check_owner()
    finally:
        worker.close()


def test_teardown_runs_with_the_context_current_before_it_is_popped() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    worker.close(teardown=lambda: cuda.record("teardown", cuda.current_context() is not None))
    names = [e[1:] for e in cuda.events]
    assert names.index(("teardown", "True")) < names.index(("pop", "0"))


def test_failing_teardown_still_pops_and_detaches() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    worker.close(teardown=lambda: 1 / 0)
    assert [e[1] for e in context_events(cuda)] == ["retain", "push", "pop", "detach"]


def test_calls_after_close_are_refused() -> None:
    cuda = FakePycudaDriver()
    worker = CudaWorker(cuda, 0, "lane_0")
    worker.start()
    worker.close()
    worker.close()
    with pytest.raises(Unavailable, match="instance 'lane_0' is closed"):
        worker.call(lambda: None)


def test_no_driver_is_unavailable_with_the_driver_error() -> None:
    cuda = FakePycudaDriver(init_error="cuInit failed: no CUDA-capable device is detected")
    worker = CudaWorker(cuda, 0, "lane_0")
    with pytest.raises(Unavailable) as error:
        worker.start()
    assert str(error.value) == (
        "no usable CUDA GPU: FakeCudaError: cuInit failed: no CUDA-capable device is detected"
    )
    assert cuda.retained == 0


def test_no_gpu_is_unavailable() -> None:
    worker = CudaWorker(FakePycudaDriver(device_count=0), 0, "lane_0")
    with pytest.raises(Unavailable, match="no CUDA GPU is visible to this process"):
        worker.start()


def test_missing_gpu_number_is_unavailable() -> None:
    worker = CudaWorker(FakePycudaDriver(device_count=1), 1, "lane_0")
    with pytest.raises(Unavailable, match=r"GPU 1 does not exist \(this machine has 1 CUDA GPU"):
        worker.start()
