"""Raw values read by a field's real type (``typing.get_type_hints``), the
same from YAML as from the text of a variable or a flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgebox.settings.conversion import convert, field_types, type_name
from edgebox.settings.top_level import Settings


def test_field_types_are_real_types_not_annotation_text() -> None:
    types = field_types(Settings)
    assert types["http_port"] is int
    assert types["api_key_file"] == Path | None
    assert types["load_model"] == tuple[str, ...]


@pytest.mark.parametrize(
    ("hint", "raw", "value"),
    [
        (int, "8000", 8000),
        (int, 8000.0, 8000),
        (float, "2.5", 2.5),
        (bool, "off", False),
        (bool, "YES", True),
        (Path, "/srv/models", Path("/srv/models")),
        (Path | None, None, None),
        (tuple[str, ...], "a, b,,c", ("a", "b", "c")),
        (tuple[str, ...], ["a", 1], ("a", "1")),
        (str, 3, "3"),
    ],
)
def test_text_and_yaml_values_read_by_type(hint, raw, value) -> None:
    assert convert(hint, raw) == value


@pytest.mark.parametrize(
    ("hint", "raw", "message"),
    [
        (int, 2.5, "expected int, got 2.5"),
        (int, True, "expected int, got True"),
        (float, "nan", "expected float, got 'nan'"),
        (bool, "maybe", "expected bool, got 'maybe'"),
        (str, None, "expected str, got None"),
        (str, ["a"], "expected str, got ['a']"),
        (Path | None, {"a": 1}, "expected Path | None, got {'a': 1}"),
        (tuple[str, ...], {"a": 1}, "expected a list, got {'a': 1}"),
    ],
)
def test_a_value_of_another_type_says_what_was_expected(hint, raw, message) -> None:
    with pytest.raises(ValueError) as info:
        convert(hint, raw)
    assert str(info.value) == message


def test_type_names_read_as_the_annotation_does() -> None:
    assert [type_name(h) for h in (int, Path | None, tuple[str, ...])] == [
        "int",
        "Path | None",
        "a list",
    ]
