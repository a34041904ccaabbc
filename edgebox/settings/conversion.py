"""A raw value (from YAML, or text from the environment or a flag) read as a
field's type, the real one from ``typing.get_type_hints``.

The environment and flags give text, YAML gives typed values: ``"8000"`` and
``8000`` both make an ``int``, ``"off"`` and ``false`` a ``bool``, and
``"a,b"`` a tuple of strings as a YAML list does. Nothing is guessed beyond
that: ``2.5`` is not an int, ``None`` is not the text ``'None'``.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from pathlib import Path
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The real type of each field of the dataclass ``cls`` (its annotations
    are text under ``from __future__ import annotations``)."""
    return typing.get_type_hints(cls)


def convert(hint: Any, value: Any) -> Any:
    """``value`` as a ``hint``; ValueError says what was expected
    (``expected int, got 'x'``)."""
    optional = _is_optional(hint)
    if value is None and optional:
        return None
    kind = _without_none(hint) if optional else hint
    try:
        # An empty YAML value is None; str() would turn it into the name 'None'.
        if value is None or isinstance(value, dict):
            raise ValueError(value)
        listed = typing.get_origin(kind) is tuple
        if isinstance(value, list) and not listed:
            raise ValueError(value)
        if kind is Path:
            return Path(str(value))
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError(value)
            number = float(value)
            if not math.isfinite(number):  # nan passes every range check
                raise ValueError(value)
            return number
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if listed:
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            return tuple(str(v) for v in value)
        return str(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected {type_name(hint)}, got {value!r}") from None


def type_name(hint: Any) -> str:
    """The type as a message shows it: ``int``, ``Path | None``, ``a list``."""
    if typing.get_origin(hint) is tuple:
        return "a list"
    if _is_optional(hint):
        return " | ".join(
            "None" if arg is types.NoneType else type_name(arg) for arg in typing.get_args(hint)
        )
    return getattr(hint, "__name__", str(hint))


def _is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and (
        types.NoneType in typing.get_args(hint)
    )


def _without_none(hint: Any) -> Any:
    kinds = [arg for arg in typing.get_args(hint) if arg is not types.NoneType]
    return kinds[0] if len(kinds) == 1 else hint
