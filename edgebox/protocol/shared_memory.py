"""System shared-memory regions (Triton's ``system_shared_memory`` extension),
shared by both transports: a client registers a POSIX shm object it created,
then sends inputs and receives outputs through it instead of the socket.

Owned by the daemon and handed to the HTTP handlers and the gRPC service;
every method may be called from any thread at once.

Lifetime: a request ``lease()``s the regions it names for as long as it reads
its inputs and writes its outputs. ``unregister`` removes a region's name at
once (it can be registered again straight away) but the mapping is only
closed when the last lease on it ends, so a request never sees its memory
unmapped under it. Input tensors are read-only numpy views of the mapping;
Python's ``mmap`` refuses to close while such a view exists, so a view that
outlives its request keeps the pages mapped until it is garbage, never
dangling.

Keys are opened as ``shm_open`` opens them: one name directly under
``/dev/shm`` (an optional leading ``/``, as tritonclient writes keys, and no
other ``/``), never following a link, and only if it is a regular file.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_shared_memory.md
"""

from __future__ import annotations

import mmap
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from edgebox.errors import InvalidArgument, NotFound, Unsupported
from edgebox.protocol import tensor_codec

SHM_ROOT = "/dev/shm"
"""Where ``shm_open`` keeps its objects on Linux; nothing outside is opened."""

_NAME_MAX = 255

REGION = "shared_memory_region"
OFFSET = "shared_memory_offset"
BYTE_SIZE = "shared_memory_byte_size"


@dataclass(frozen=True)
class RegionStatus:
    """A registered region as the status endpoints report it."""

    name: str
    key: str
    offset: int
    byte_size: int


@dataclass(frozen=True)
class TensorLocation:
    """Where a tensor's bytes lie, from its ``shared_memory_*`` parameters."""

    region: str
    offset: int
    byte_size: int


class _Region:
    """One mapping; ``users`` and ``retired`` are guarded by the registry's lock."""

    def __init__(self, status: RegionStatus, mapping: mmap.mmap, start: int) -> None:
        self.status = status
        self.mapping = mapping
        self.view = memoryview(mapping)[start : start + status.byte_size]
        self.users = 0
        self.retired = False

    def close(self) -> None:
        """Unmap, unless a tensor view still holds the pages: then the
        mapping closes when that view is garbage collected."""
        self.view.release()
        try:
            self.mapping.close()
        except BufferError:
            pass


class SharedMemoryRegistry:
    """The registered regions, capped at ``max_regions`` and ``max_bytes``
    mapped in all (regions retired but still leased count until closed)."""

    def __init__(self, max_bytes: int = 1 << 30, max_regions: int = 64) -> None:
        self.max_bytes = max_bytes
        self.max_regions = max_regions
        self._lock = threading.Lock()
        self._regions: dict[str, _Region] = {}
        self._mapped_bytes = 0

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``byte_size`` bytes at ``offset`` of the shm object ``key``;
        InvalidArgument naming the region for anything wrong (name taken, key
        missing or not a shm name, range past the object's end, limits)."""
        where = f"system shared memory region '{name}'"
        if not isinstance(name, str) or not name:
            raise InvalidArgument("system shared memory: a region needs a non-empty 'name'")
        for field, value in (("offset", offset), ("byte_size", byte_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgument(f"{where}: '{field}' must be a non-negative integer")
        if byte_size == 0:
            raise InvalidArgument(f"{where}: 'byte_size' must be at least 1")
        path = _shm_path(where, key)
        with self._lock:
            self._check_free(where, name, byte_size)
        try:
            # O_NONBLOCK: a FIFO planted under /dev/shm cannot hang the open.
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            raise InvalidArgument(f"{where}: no shared memory object with key '{key}'") from None
        except OSError as exc:
            raise InvalidArgument(
                f"{where}: cannot open shared memory key '{key}': {exc.strerror}"
            ) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidArgument(f"{where}: key '{key}' is not a shared memory object")
            if offset + byte_size > info.st_size:
                raise InvalidArgument(
                    f"{where}: offset {offset} + byte_size {byte_size} runs past the end of "
                    f"key '{key}' ({info.st_size} bytes)"
                )
            start = offset % mmap.ALLOCATIONGRANULARITY
            mapping = mmap.mmap(fd, start + byte_size, offset=offset - start)
        finally:
            os.close(fd)
        region = _Region(RegionStatus(name, key, offset, byte_size), mapping, start)
        with self._lock:
            try:
                self._check_free(where, name, byte_size)
            except InvalidArgument:
                region.close()
                raise
            self._regions[name] = region
            self._mapped_bytes += byte_size

    def unregister(self, name: str = "") -> None:
        """Forget ``name`` (every region when empty); an unknown name is not an
        error, as in Triton. Mappings close once no request uses them."""
        with self._lock:
            names = [name] if name else list(self._regions)
            closing = []
            for each in names:
                region = self._regions.pop(each, None)
                if region is None:
                    continue
                region.retired = True
                if region.users == 0:
                    self._mapped_bytes -= region.status.byte_size
                    closing.append(region)
        for region in closing:
            region.close()

    def close(self) -> None:
        """At shutdown: every region is unregistered (and unmapped when unused)."""
        self.unregister()

    def status(self, name: str = "") -> list[RegionStatus]:
        """Every region (``name`` empty) or that one; InvalidArgument when
        ``name`` is not registered."""
        with self._lock:
            if not name:
                return [region.status for region in self._regions.values()]
            region = self._regions.get(name)
        if region is None:
            raise NotFound(f"system shared memory region '{name}': not registered")
        return [region.status]

    @property
    def mapped_bytes(self) -> int:
        with self._lock:
            return self._mapped_bytes

    @contextmanager
    def lease(self) -> Iterator[RegionLease]:
        """The regions one request uses, held until the block ends."""
        lease = RegionLease(self)
        try:
            yield lease
        finally:
            lease.release()

    def _check_free(self, where: str, name: str, byte_size: int) -> None:
        if name in self._regions:
            raise InvalidArgument(f"{where}: already registered; unregister it first")
        if len(self._regions) >= self.max_regions:
            raise InvalidArgument(
                f"{where}: {len(self._regions)} regions are registered, the most allowed "
                f"(shared_memory_max_regions {self.max_regions})"
            )
        if self._mapped_bytes + byte_size > self.max_bytes:
            raise InvalidArgument(
                f"{where}: mapping {byte_size} more bytes would pass "
                f"shared_memory_max_bytes ({self.max_bytes}; {self._mapped_bytes} mapped)"
            )

    def _acquire(self, where: str, name: str) -> _Region:
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise InvalidArgument(f"{where}: shared memory region '{name}' is not registered")
            region.users += 1
            return region

    def _release(self, region: _Region) -> None:
        with self._lock:
            region.users -= 1
            if not (region.retired and region.users == 0):
                return
            self._mapped_bytes -= region.status.byte_size
        region.close()


class RegionLease:
    """Regions taken by one request (one thread); ``release`` gives them back."""

    def __init__(self, registry: SharedMemoryRegistry) -> None:
        self._registry = registry
        self._held: dict[str, _Region] = {}

    def view(self, where: str, location: TensorLocation, writable: bool = False) -> memoryview:
        """The ``location``'s bytes (read-only unless ``writable``), checked to
        lie inside its region."""
        region = self._held.get(location.region)
        if region is None:
            region = self._registry._acquire(where, location.region)
            self._held[location.region] = region
        size = region.status.byte_size
        if location.offset + location.byte_size > size:
            raise InvalidArgument(
                f"{where}: {OFFSET} {location.offset} + {BYTE_SIZE} {location.byte_size} "
                f"runs past the end of shared memory region '{location.region}' ({size} bytes)"
            )
        view = region.view[location.offset : location.offset + location.byte_size]
        return view if writable else view.toreadonly()

    def release(self) -> None:
        held, self._held = self._held, {}
        for region in held.values():
            self._registry._release(region)


def tensor_location(where: str, parameters: dict) -> TensorLocation | None:
    """The shared-memory location a tensor's parameters give, None when they
    name no region; InvalidArgument for a malformed one."""
    if REGION not in parameters:
        return None
    region = parameters[REGION]
    if not isinstance(region, str) or not region:
        raise InvalidArgument(f"{where}: '{REGION}' must be a region name")
    values = {}
    for field, default in ((OFFSET, 0), (BYTE_SIZE, None)):
        value = parameters.get(field, default)
        if value is None:
            raise InvalidArgument(f"{where}: '{field}' is needed with '{REGION}'")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidArgument(f"{where}: '{field}' must be a non-negative integer")
        values[field] = value
    return TensorLocation(region, values[OFFSET], values[BYTE_SIZE])


def tensor_view(
    where: str, parameters: dict, regions: RegionLease | None, writable: bool = False
) -> memoryview | None:
    """The leased bytes a tensor's parameters place in shared memory (an
    output's ``writable``), None when they name no region. Unsupported where
    the caller leased no regions; InvalidArgument for a malformed location or
    one outside its region."""
    if REGION not in parameters:
        return None
    location = tensor_location(where, parameters)
    if regions is None:
        kind = "outputs" if writable else "inputs"
        raise Unsupported(f"{where}: shared memory {kind} are not supported here")
    return regions.view(where, location, writable)


def place_outputs(
    where: str, outputs: list, asked: dict[str, dict], regions: RegionLease | None
) -> set[str]:
    """Write each output that ``asked`` (output name -> its request
    parameters) places in shared memory into its region, and return the names
    written. Their response entries carry no data and, as Triton's, no
    parameters either: the HTTP client of perf_analyzer reads any output
    ``parameters`` as binary data and fails without ``binary_data_size``.
    Every size is checked before anything is written: an output that does not
    fit is InvalidArgument naming its region, and no region is touched."""
    placed = []
    for tensor in outputs:
        at = f"{where}, output '{tensor.name}'"
        location = tensor_location(at, asked.get(tensor.name, {}))
        if location is None:
            continue
        if regions is None:
            raise Unsupported(f"{at}: shared memory outputs are not supported here")
        data = tensor_codec.encode_tensor(tensor)
        size = _nbytes(data)
        if size > location.byte_size:
            raise InvalidArgument(
                f"{at}: {size} bytes do not fit in shared memory region "
                f"'{location.region}' ({BYTE_SIZE} {location.byte_size})"
            )
        placed.append((tensor.name, location, data, size, regions.view(at, location, True)))
    for _, _, data, size, view in placed:
        view[:size] = _bytes_of(data)
    return {name for name, *_ in placed}


def _nbytes(data) -> int:
    return data.nbytes if hasattr(data, "nbytes") else len(data)


def _bytes_of(data) -> memoryview:
    if hasattr(data, "reshape"):
        return memoryview(data.reshape(-1).view("uint8"))
    return memoryview(data).cast("B")


def _shm_path(where: str, key) -> str:
    """``/dev/shm/<name>`` for a key ``shm_open`` accepts as one name."""
    if not isinstance(key, str):
        raise InvalidArgument(f"{where}: 'key' must be a string")
    name = key[1:] if key.startswith("/") else key
    if (
        not name
        or "/" in name
        or "\0" in name
        or name in (".", "..")
        or len(name.encode()) > _NAME_MAX
    ):
        raise InvalidArgument(
            f"{where}: key '{key}' is not a shared memory name (one name of at most "
            f"{_NAME_MAX} bytes, optionally after a leading '/', as shm_open takes it)"
        )
    return os.path.join(SHM_ROOT, name)
