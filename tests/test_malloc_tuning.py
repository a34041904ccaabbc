"""The allocator tuning keeps frame-sized buffers in the heap: a thread that
allocates and frees a request's worth of megabyte buffers over and over
faults its pages in once, not every time; and what the operator set wins."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgebox.malloc_tuning import (
    ARENA_MAX,
    M_ARENA_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    tune_malloc,
)

FRAMES = """
import resource, sys, threading
from edgebox.malloc_tuning import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc() == ["mmap_threshold", "trim_threshold", "arena_max"]
faults = []
def requests():
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(40):
        frame = b"x" * 2_700_000
        copy = frame + b"y"
        answer = b"z" * 800_000
        del frame, copy, answer
    faults.append((resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / 40)
worker = threading.Thread(target=requests)
worker.start()
worker.join()
print(faults[0])
"""


def _faults_per_request(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", FRAMES, mode], capture_output=True, text=True, check=True
    )
    return float(done.stdout.split()[-1])


def test_frame_sized_buffers_stop_faulting_in_every_request():
    plain = _faults_per_request("plain")
    tuned = _faults_per_request("tuned")
    # 6.2 MB a request is about 1,500 fresh pages when every buffer is mmap'd.
    assert plain > 1000, plain
    assert tuned < plain / 10, (plain, tuned)


class FakeLibc:
    """Records mallopt calls; answers as glibc does (1: done)."""

    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, parameter, value) -> int:
        self.calls.append((parameter.value, value.value))
        return self.answer


def test_both_thresholds_are_raised_and_the_arenas_capped():
    libc = FakeLibc()
    assert tune_malloc({}, libc) == ["mmap_threshold", "trim_threshold", "arena_max"]
    assert libc.calls == [
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        (M_ARENA_MAX, ARENA_MAX),
    ]


@pytest.mark.parametrize(
    ("environ", "left"),
    [
        ({"MALLOC_MMAP_THRESHOLD_": "65536"}, "mmap_threshold"),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, "trim_threshold"),
        ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "mmap_threshold"),
        ({"MALLOC_ARENA_MAX": "8"}, "arena_max"),
        ({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.trim_threshold=1"}, "trim_threshold"),
    ],
)
def test_a_parameter_the_operator_set_is_left_alone(environ, left):
    libc = FakeLibc()
    done = tune_malloc(environ, libc)
    assert left not in done and len(done) == 2


def test_a_refused_mallopt_is_reported_not_raised(caplog):
    assert tune_malloc({}, FakeLibc(answer=0)) == []
    assert "refused" in caplog.text
