"""The local response cache: bounded by the bytes of its answers, least
recently used evicted first, safe from many threads, and an answer once kept
never changes, whatever its first owner or a later client does."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from edgebox.caching.response_cache import CachedAnswer, ResponseCache
from edgebox.tensors import InferRequest, InferResponse, Tensor

ANSWER_BYTES = 64 + len("OUT")
"""One answer below: 16 FP32 values under the name OUT."""


def answer(value: float, parameters: dict | None = None) -> InferResponse:
    data = np.full(16, value, dtype=np.float32)
    return InferResponse("m", "", [Tensor("OUT", "FP32", data)], parameters=parameters or {})


def request(tag: str = "r") -> InferRequest:
    return InferRequest("m", [], id=tag)


def value_of(kept: CachedAnswer) -> float:
    return float(kept.response(request()).outputs[0].data[0])


def test_a_kept_answer_is_found_under_its_key_and_answers_with_the_askers_id() -> None:
    cache = ResponseCache(1024)
    assert cache.lookup(b"k") is None
    assert cache.insert(b"k", answer(3.0, {"note": "x"}))
    kept = cache.lookup(b"k")
    assert kept is not None
    response = kept.response(InferRequest("m", [], model_version="1", id="second"))
    assert response.id == "second"
    assert response.parameters == {"note": "x"}
    np.testing.assert_array_equal(response.output("OUT").data, np.full(16, 3.0, np.float32))


def test_an_entry_counts_its_output_bytes_and_names() -> None:
    cache = ResponseCache(1024)
    cache.insert(b"k", answer(1.0))
    text = InferResponse("m", "", [Tensor("T", "BYTES", np.array([b"ab", b""], dtype=object))])
    cache.insert(b"t", text)
    assert cache.statistics().used_bytes == ANSWER_BYTES + (4 + 2) + (4 + 0) + len("T")


def test_the_least_recently_used_answer_is_evicted_first() -> None:
    cache = ResponseCache(3 * ANSWER_BYTES)
    for index in range(3):
        cache.insert(bytes([index]), answer(index))
    assert cache.lookup(bytes([0])) is not None  # 0 is now the most recently used
    cache.insert(b"\x03", answer(3))
    assert cache.lookup(bytes([1])) is None
    assert [value_of(cache.lookup(bytes([i]))) for i in (0, 2, 3)] == [0.0, 2.0, 3.0]
    figures = cache.statistics()
    assert (figures.entries, figures.evictions, figures.used_bytes) == (3, 1, 3 * ANSWER_BYTES)


def test_a_large_answer_evicts_as_many_as_it_needs() -> None:
    cache = ResponseCache(4 * ANSWER_BYTES)
    for index in range(4):
        cache.insert(bytes([index]), answer(index))
    big = InferResponse("m", "", [Tensor("OUT", "FP32", np.zeros(32, np.float32))])
    assert cache.insert(b"big", big)
    assert [cache.lookup(bytes([i])) is None for i in range(4)] == [True, True, False, False]
    assert cache.statistics().evictions == 2


def test_an_answer_larger_than_the_cache_is_not_kept_and_evicts_nothing() -> None:
    cache = ResponseCache(ANSWER_BYTES)
    cache.insert(b"small", answer(1.0))
    big = InferResponse("m", "", [Tensor("OUT", "FP32", np.zeros(17, np.float32))])
    assert not cache.insert(b"big", big)
    assert cache.lookup(b"big") is None
    assert cache.lookup(b"small") is not None
    assert cache.statistics().evictions == 0


def test_an_answer_once_kept_is_never_replaced() -> None:
    cache = ResponseCache(1024)
    cache.insert(b"k", answer(1.0))
    assert not cache.insert(b"k", answer(2.0))
    assert value_of(cache.lookup(b"k")) == 1.0
    assert cache.statistics().used_bytes == ANSWER_BYTES


def test_a_kept_answer_does_not_change_with_its_first_owner_or_a_later_client() -> None:
    cache = ResponseCache(1024)
    original = answer(1.0, {"nested": {"a": 1}})
    cache.insert(b"k", original)
    original.outputs[0].data[:] = 99.0
    original.parameters["nested"]["a"] = 2
    hit = cache.lookup(b"k").response(request())
    with pytest.raises(ValueError):
        hit.outputs[0].data[0] = 5.0
    hit.outputs[0] = Tensor("OUT", "FP32", np.zeros(16, np.float32))
    hit.parameters["nested"]["a"] = 3
    again = cache.lookup(b"k").response(request())
    np.testing.assert_array_equal(again.output("OUT").data, np.full(16, 1.0, np.float32))
    assert again.parameters == {"nested": {"a": 1}}


def test_lookups_hits_misses_and_utilization_are_counted() -> None:
    cache = ResponseCache(4 * ANSWER_BYTES)
    cache.lookup(b"k")
    cache.insert(b"k", answer(1.0))
    cache.lookup(b"k")
    cache.lookup(b"k")
    figures = cache.statistics()
    assert (figures.lookups, figures.hits, figures.misses) == (3, 2, 1)
    assert figures.utilization == 0.25
    assert figures.lookup_ns > 0 and figures.insertion_ns > 0


def test_a_cache_needs_a_positive_size() -> None:
    with pytest.raises(ValueError, match="positive size, got 0"):
        ResponseCache(0)


def test_many_threads_keep_the_byte_bound_and_every_count() -> None:
    """Eight threads insert and look up 40 keys each over a cache that holds
    ten answers; started together (a barrier) so they contend for the lock."""
    cache = ResponseCache(10 * ANSWER_BYTES)
    threads_count, keys_each = 8, 40
    start = threading.Barrier(threads_count)
    wrong: list[str] = []

    def work(thread: int) -> None:
        start.wait(10)
        for index in range(keys_each):
            key = f"{index % 20}".encode()
            kept = cache.lookup(key)
            if kept is None:
                cache.insert(key, answer(index % 20))
            elif value_of(kept) != index % 20:
                wrong.append(f"thread {thread} key {key!r}: {value_of(kept)}")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    figures = cache.statistics()
    assert wrong == []
    assert figures.lookups == figures.hits + figures.misses == threads_count * keys_each
    assert figures.entries <= 10
    assert figures.used_bytes == figures.entries * ANSWER_BYTES
