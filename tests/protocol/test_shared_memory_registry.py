"""SharedMemoryRegistry: registering real POSIX shm objects under /dev/shm,
every bound it checks, and that a region in use is never unmapped under a
request."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from edgebox.errors import InvalidArgument, NotFound, Unsupported
from edgebox.protocol.shared_memory import (
    RegionStatus,
    SharedMemoryRegistry,
    TensorLocation,
    place_outputs,
    tensor_location,
    tensor_view,
)
from edgebox.tensors import Tensor


def test_register_status_unregister(shm_key):
    key = shm_key(64)
    registry = SharedMemoryRegistry()
    registry.register("a", key, 8, 32)
    assert registry.status() == [RegionStatus("a", key, 8, 32)]
    assert registry.status("a") == [RegionStatus("a", key, 8, 32)]
    assert registry.mapped_bytes == 32
    registry.unregister("a")
    assert registry.status() == []
    assert registry.mapped_bytes == 0
    registry.unregister("a")  # an unknown name is not an error, as in Triton


def test_status_of_unknown_region_is_not_found():
    with pytest.raises(NotFound) as caught:
        SharedMemoryRegistry().status("zz")
    assert str(caught.value) == "system shared memory region 'zz': not registered"


def test_region_registered_twice_is_refused(shm_key):
    key = shm_key(16)
    registry = SharedMemoryRegistry()
    registry.register("a", key, 0, 16)
    with pytest.raises(InvalidArgument) as caught:
        registry.register("a", key, 0, 16)
    assert str(caught.value) == (
        "system shared memory region 'a': already registered; unregister it first"
    )


def test_missing_key_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        SharedMemoryRegistry().register("b", "/edgebox-no-such-key", 0, 4)
    assert str(caught.value) == (
        "system shared memory region 'b': no shared memory object with key '/edgebox-no-such-key'"
    )


def test_range_past_the_objects_end_is_refused(shm_key):
    key = shm_key(64)
    with pytest.raises(InvalidArgument) as caught:
        SharedMemoryRegistry().register("c", key, 60, 8)
    assert str(caught.value) == (
        f"system shared memory region 'c': offset 60 + byte_size 8 runs past the end of "
        f"key '{key}' (64 bytes)"
    )


@pytest.mark.parametrize(
    "key", ["../etc/passwd", "/a/b", "..", "/..", "/", "", "x" * 256, "a\0b", "//dev/shm/x"]
)
def test_keys_that_are_not_one_shm_name_are_refused(key):
    with pytest.raises(InvalidArgument) as caught:
        SharedMemoryRegistry().register("d", key, 0, 4)
    assert "is not a shared memory name" in str(caught.value)


def test_a_link_in_dev_shm_is_not_followed(tmp_path):
    target = tmp_path / "secret"
    target.write_bytes(b"x" * 16)
    name = f"edgebox-test-link-{os.getpid()}"
    os.symlink(target, f"/dev/shm/{name}")
    try:
        with pytest.raises(InvalidArgument) as caught:
            SharedMemoryRegistry().register("e", name, 0, 4)
    finally:
        os.unlink(f"/dev/shm/{name}")
    assert str(caught.value).startswith(
        f"system shared memory region 'e': cannot open shared memory key '{name}'"
    )


def test_a_fifo_in_dev_shm_is_refused_without_blocking():
    name = f"edgebox-test-fifo-{os.getpid()}"
    os.mkfifo(f"/dev/shm/{name}")
    try:
        with pytest.raises(InvalidArgument) as caught:
            SharedMemoryRegistry().register("g", name, 0, 4)
    finally:
        os.unlink(f"/dev/shm/{name}")
    assert str(caught.value) == (
        f"system shared memory region 'g': key '{name}' is not a shared memory object"
    )


@pytest.mark.parametrize(
    "offset, byte_size, message",
    [
        (-1, 4, "'offset' must be a non-negative integer"),
        (0, "4", "'byte_size' must be a non-negative integer"),
        (0, 0, "'byte_size' must be at least 1"),
    ],
)
def test_malformed_ranges_are_refused(shm_key, offset, byte_size, message):
    with pytest.raises(InvalidArgument) as caught:
        SharedMemoryRegistry().register("f", shm_key(8), offset, byte_size)
    assert str(caught.value) == f"system shared memory region 'f': {message}"


def test_limits_on_regions_and_bytes(shm_key):
    registry = SharedMemoryRegistry(max_bytes=100, max_regions=2)
    registry.register("a", shm_key(64), 0, 64)
    with pytest.raises(InvalidArgument) as caught:
        registry.register("b", shm_key(64), 0, 64)
    assert str(caught.value) == (
        "system shared memory region 'b': mapping 64 more bytes would pass "
        "shared_memory_max_bytes (100; 64 mapped)"
    )
    registry.register("b", shm_key(64), 0, 36)
    with pytest.raises(InvalidArgument) as caught:
        registry.register("c", shm_key(8), 0, 1)
    assert str(caught.value) == (
        "system shared memory region 'c': 2 regions are registered, the most allowed "
        "(shared_memory_max_regions 2)"
    )


def test_input_views_are_zero_copy_and_read_only(shm_key):
    values = np.arange(4, dtype=np.float32)
    key = shm_key(64, b"\0" * 16 + values.tobytes())
    registry = SharedMemoryRegistry()
    registry.register("in", key, 16, 16)
    with registry.lease() as lease:
        view = lease.view("here", TensorLocation("in", 0, 16))
        array = np.frombuffer(view, dtype=np.float32)
        assert array.tolist() == values.tolist()
        assert not array.flags.writeable
        with open(f"/dev/shm/{key[1:]}", "r+b") as handle:
            handle.seek(16)
            handle.write(np.float32(42).tobytes())
        assert array[0] == 42  # the same pages, not a copy
        del array, view


def test_lease_checks_region_and_bounds(shm_key):
    registry = SharedMemoryRegistry()
    registry.register("r", shm_key(32), 0, 32)
    with registry.lease() as lease:
        with pytest.raises(InvalidArgument) as caught:
            lease.view("model 'm', input 'X'", TensorLocation("nope", 0, 4))
        assert str(caught.value) == (
            "model 'm', input 'X': shared memory region 'nope' is not registered"
        )
        with pytest.raises(InvalidArgument) as caught:
            lease.view("model 'm', input 'X'", TensorLocation("r", 30, 4))
        assert str(caught.value) == (
            "model 'm', input 'X': shared_memory_offset 30 + shared_memory_byte_size 4 runs "
            "past the end of shared memory region 'r' (32 bytes)"
        )


def test_unregister_waits_for_the_request_using_the_region(shm_key):
    key = shm_key(16, b"abcd")
    registry = SharedMemoryRegistry()
    registry.register("r", key, 0, 16)
    with registry.lease() as lease:
        view = lease.view("here", TensorLocation("r", 0, 4))
        registry.unregister("r")
        assert registry.status() == []
        registry.register("r", key, 0, 8)  # the name is free again at once
        assert bytes(view) == b"abcd"  # the old mapping is still readable
        assert registry.mapped_bytes == 16 + 8
        del view
    assert registry.mapped_bytes == 8
    registry.close()
    assert registry.mapped_bytes == 0 and registry.status() == []


def test_concurrent_leases_and_unregisters_never_fault(shm_key):
    key = shm_key(4096, bytes(range(256)) * 16)
    registry = SharedMemoryRegistry()
    errors: list[BaseException] = []

    def reader() -> None:
        for _ in range(300):
            try:
                with registry.lease() as lease:
                    assert bytes(lease.view("t", TensorLocation("r", 0, 4))) == b"\0\1\2\3"
            except InvalidArgument:
                pass
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

    def churn() -> None:
        for _ in range(300):
            try:
                registry.register("r", key, 0, 4096)
            except InvalidArgument:
                pass
            registry.unregister("r")

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=churn)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    registry.close()
    assert registry.mapped_bytes == 0


def test_tensor_location_parameters():
    assert tensor_location("w", {"binary_data_size": 4}) is None
    assert tensor_location(
        "w", {"shared_memory_region": "r", "shared_memory_byte_size": 8}
    ) == TensorLocation("r", 0, 8)
    with pytest.raises(InvalidArgument) as caught:
        tensor_location("w", {"shared_memory_region": "r"})
    assert str(caught.value) == (
        "w: 'shared_memory_byte_size' is needed with 'shared_memory_region'"
    )
    with pytest.raises(InvalidArgument) as caught:
        tensor_location(
            "w",
            {"shared_memory_region": "r", "shared_memory_offset": -1, "shared_memory_byte_size": 1},
        )
    assert str(caught.value) == "w: 'shared_memory_offset' must be a non-negative integer"


def test_tensor_view_is_the_leased_bytes_and_refused_without_a_lease(shm_key):
    """Both transports' one rule for a tensor placed in shared memory: a
    malformed location is refused first, then a caller with no lease."""
    registry = SharedMemoryRegistry()
    registry.register("r", shm_key(32), 0, 32)
    placed = {"shared_memory_region": "r", "shared_memory_offset": 8, "shared_memory_byte_size": 4}
    assert tensor_view("w", {"binary_data_size": 4}, None) is None
    with registry.lease() as lease:
        assert len(tensor_view("w", placed, lease)) == 4
        assert tensor_view("w", placed, lease).readonly
        assert not tensor_view("w", placed, lease, writable=True).readonly
    for writable, kind in ((False, "inputs"), (True, "outputs")):
        with pytest.raises(Unsupported) as caught:
            tensor_view("w", placed, None, writable)
        assert str(caught.value) == f"w: shared memory {kind} are not supported here"
    with pytest.raises(InvalidArgument, match="'shared_memory_byte_size' is needed"):
        tensor_view("w", {"shared_memory_region": "r"}, None)


def test_outputs_are_written_only_when_every_one_fits(shm_key):
    key = shm_key(64)
    registry = SharedMemoryRegistry()
    registry.register("out", key, 0, 64)
    small = Tensor("S", "INT32", np.array([7, 8], dtype=np.int32))
    big = Tensor("B", "FP32", np.ones(8, dtype=np.float32))
    asked = {
        "S": {"shared_memory_region": "out", "shared_memory_byte_size": 8},
        "B": {
            "shared_memory_region": "out",
            "shared_memory_offset": 8,
            "shared_memory_byte_size": 16,
        },
    }
    with registry.lease() as lease, pytest.raises(InvalidArgument) as caught:
        place_outputs("model 'm' version 1", [small, big], asked, lease)
    assert str(caught.value) == (
        "model 'm' version 1, output 'B': 32 bytes do not fit in shared memory region 'out' "
        "(shared_memory_byte_size 16)"
    )
    with open(f"/dev/shm/{key[1:]}", "rb") as handle:
        assert handle.read() == b"\0" * 64
    asked["B"]["shared_memory_byte_size"] = 32
    with registry.lease() as lease:
        placed = place_outputs("m", [small, big], asked, lease)
    assert placed == {"S", "B"}
    with open(f"/dev/shm/{key[1:]}", "rb") as handle:
        content = handle.read()
    assert np.frombuffer(content[:8], np.int32).tolist() == [7, 8]
    assert np.frombuffer(content[8:40], np.float32).tolist() == [1.0] * 8
    with pytest.raises(Unsupported):
        place_outputs("m", [small], asked, None)
    registry.close()
