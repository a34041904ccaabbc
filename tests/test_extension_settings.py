"""The one rule the logging and trace extensions share for a client's update:
a JSON object of known keys, judged in the client's order."""

from __future__ import annotations

import pytest

from edgebox.errors import InvalidArgument
from edgebox.extension_settings import known_changes


def test_known_keys_pass_in_the_clients_order() -> None:
    changes = {"b": 2, "a": None}
    assert list(known_changes("x settings", changes, ("a", "b"))) == [("b", 2), ("a", None)]


def test_an_update_that_is_no_object_is_refused() -> None:
    with pytest.raises(InvalidArgument) as info:
        list(known_changes("x settings", ["a"], ("a",)))
    assert str(info.value) == "x settings: expected a JSON object, got list"


def test_an_unknown_key_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(InvalidArgument) as info:
        list(known_changes("x settings", {"c": 1}, ("a", "b")))
    assert str(info.value) == "x settings: unknown setting 'c' (known: 'a', 'b')"


def test_keys_are_judged_as_they_come_so_an_earlier_bad_value_is_refused_first() -> None:
    seen = []
    with pytest.raises(InvalidArgument):
        for key, _ in known_changes("x settings", {"a": 1, "c": 2}, ("a", "b")):
            seen.append(key)
    assert seen == ["a"]
