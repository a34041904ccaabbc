"""``--cache-config`` entries read as Triton reads them, and refused with the
entry quoted where edgebox cannot honour them."""

from __future__ import annotations

import pytest

from edgebox.caching.cache_config import cache_size_bytes


def test_no_entry_means_no_cache() -> None:
    assert cache_size_bytes([]) == 0


def test_the_local_cache_size_is_read_in_bytes() -> None:
    assert cache_size_bytes(["local,size=1048576"]) == 1048576


def test_a_key_given_twice_keeps_its_last_value_as_in_triton() -> None:
    assert cache_size_bytes(["local,size=1048576", "local,size=2048"]) == 2048


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("local", "expected '<cache>,<key>=<value>', got 'local'"),
        ("local,size", "expected '<cache>,<key>=<value>', got 'local,size'"),
        (",size=10", "expected '<cache>,<key>=<value>', got ',size=10'"),
        (
            "redis,host=127.0.0.1",
            "cache 'redis' in 'redis,host=127.0.0.1' is not supported: edgebox has only "
            "Triton's 'local' cache ('local,size=<bytes>')",
        ),
        (
            "local,bogus=1",
            "unknown key 'bogus' in 'local,bogus=1': the local cache takes only 'size'",
        ),
    ],
)
def test_a_malformed_or_foreign_entry_is_refused_naming_it(entry: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        cache_size_bytes([entry])
    assert str(info.value) == message


@pytest.mark.parametrize("size", ["0", "-5", "abc", "", "1e3", "1MB", " 10", "١٢"])
def test_a_size_that_is_not_a_positive_number_of_bytes_is_refused(size: str) -> None:
    with pytest.raises(ValueError) as info:
        cache_size_bytes([f"local,size={size}"])
    assert str(info.value) == (
        f"the local cache's size must be a positive number of bytes, got '{size}'"
    )
