"""The local response cache: answers by key, bounded by the bytes they hold,
least recently used evicted first, shared by every model (Triton's ``local``
cache, https://github.com/triton-inference-server/local_cache).

Any thread may look up or insert; one lock guards the entries and the
counters, and is held only for dictionary work: copying an answer in happens
before the lock is taken, building a hit's response after it is released.
An entry's size is the bytes of its outputs' data (a BYTES element counts its
4-byte length too) plus their names; an answer larger than the whole cache is
not kept. Triton's local cache counts its own allocator's overhead as well,
so the same size holds a few more answers here than there.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebox.tensors import InferRequest, InferResponse, Tensor


@dataclass(frozen=True)
class CachedAnswer:
    """One kept answer: its outputs as (name, datatype, read-only array), in
    the order they were answered, and the response's parameters."""

    outputs: tuple[tuple[str, str, np.ndarray], ...]
    parameters: dict[str, Any]
    nbytes: int

    @classmethod
    def of(cls, response: InferResponse) -> CachedAnswer:
        """A copy of ``response`` that nothing else holds: its arrays copied
        and made read-only, its parameters deep-copied."""
        outputs = []
        nbytes = 0
        for tensor in response.outputs:
            data = np.array(tensor.data, copy=True)
            data.flags.writeable = False
            outputs.append((tensor.name, tensor.datatype, data))
            nbytes += len(tensor.name.encode("utf-8", "surrogatepass")) + _data_bytes(data)
        return cls(tuple(outputs), copy.deepcopy(response.parameters), nbytes)

    def response(self, request: InferRequest) -> InferResponse:
        """The answer to ``request``: fresh tensors over the kept (read-only)
        arrays, so whoever changes the response's lists changes only theirs."""
        return InferResponse(
            request.model_name,
            request.model_version,
            [Tensor(name, datatype, data) for name, datatype, data in self.outputs],
            id=request.id,
            parameters=copy.deepcopy(self.parameters),
        )


def _data_bytes(data: np.ndarray) -> int:
    if data.dtype.kind == "O":
        return sum(4 + len(item if isinstance(item, bytes) else str(item)) for item in data.flat)
    return data.nbytes


@dataclass(frozen=True)
class CacheStatistics:
    """The whole cache's figures (Triton's ``nv_cache_*`` gauges); durations
    in nanoseconds."""

    size_bytes: int
    used_bytes: int
    entries: int
    lookups: int
    hits: int
    misses: int
    evictions: int
    lookup_ns: int
    insertion_ns: int

    @property
    def utilization(self) -> float:
        """The share of ``size_bytes`` the entries hold, 0.0 to 1.0."""
        return self.used_bytes / self.size_bytes


class ResponseCache:
    """Shared by every model that enables ``response_cache``; built once by
    the daemon from ``cache_config``."""

    def __init__(self, size_bytes: int) -> None:
        if size_bytes < 1:
            raise ValueError(f"a response cache needs a positive size, got {size_bytes}")
        self.size_bytes = size_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, CachedAnswer] = OrderedDict()
        self._used = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._lookup_ns = 0
        self._insertion_ns = 0

    def lookup(self, key: bytes) -> CachedAnswer | None:
        """The answer kept under ``key``, now the most recently used, or None
        (a miss); either way one lookup is counted."""
        start = time.perf_counter_ns()
        with self._lock:
            answer = self._entries.get(key)
            if answer is None:
                self._misses += 1
            else:
                self._entries.move_to_end(key)
                self._hits += 1
            self._lookup_ns += time.perf_counter_ns() - start
        return answer

    def insert(self, key: bytes, response: InferResponse) -> bool:
        """Keep a copy of ``response`` under ``key``, evicting the least
        recently used answers until it fits. False when it was not kept: an
        answer is already kept under ``key`` (it stays: both answer the same
        request, and an answer once handed out is never replaced), or it is
        larger than the whole cache."""
        start = time.perf_counter_ns()
        answer = CachedAnswer.of(response)
        with self._lock:
            kept = key not in self._entries and answer.nbytes <= self.size_bytes
            if kept:
                while self._used + answer.nbytes > self.size_bytes:
                    _, evicted = self._entries.popitem(last=False)
                    self._used -= evicted.nbytes
                    self._evictions += 1
                self._entries[key] = answer
                self._used += answer.nbytes
            self._insertion_ns += time.perf_counter_ns() - start
        return kept

    def statistics(self) -> CacheStatistics:
        with self._lock:
            return CacheStatistics(
                size_bytes=self.size_bytes,
                used_bytes=self._used,
                entries=len(self._entries),
                lookups=self._hits + self._misses,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                lookup_ns=self._lookup_ns,
                insertion_ns=self._insertion_ns,
            )
