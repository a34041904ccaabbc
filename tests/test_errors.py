"""The one rule for putting a foreign exception into a message (``one_line``)."""

from __future__ import annotations

from edgebox.errors import one_line


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_is_its_type_and_first_line() -> None:
    error = RuntimeError("  cuInit failed\n  at driver.cpp:12\n")
    assert one_line(error) == "RuntimeError: cuInit failed"


def test_an_exception_without_a_message_is_its_type_alone() -> None:
    assert one_line(MemoryError()) == "MemoryError"
    assert one_line(KeyboardInterrupt("")) == "KeyboardInterrupt"


def test_an_exception_whose_str_raises_is_its_type_alone() -> None:
    assert one_line(Unprintable("x")) == "Unprintable"


def test_a_trailing_colon_is_dropped() -> None:
    assert one_line(ValueError("bad value: ")) == "ValueError: bad value"
