"""Command-line flags made from the settings' declarations: every scalar field
of a settings dataclass gets ``--<field-name>`` (``http_port`` ->
``--http-port``, help from its docstring), and every field of a settings
section one made from its names (``--mqtt-url``, ``--mqtt-qos``). So a new
setting gets its flag, ``EDGEBOX_*`` variable and YAML key from its
declaration alone; ``load_settings`` reads the flags' text by each field's
type, like an ``EDGEBOX_*`` variable.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgebox.settings import SECTIONS
from edgebox.settings.conversion import field_types

_SCALARS = (str, int, float, bool, Path)


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    special: Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """``--<field-name>`` (``_`` as ``-``, dest the field's name) for every
    scalar field of the settings dataclass ``cls``, in field order; a field
    named in ``special`` gets those ``add_argument`` keywords instead, and
    sections and lists (any other type) get none here.

    The value stays the text given: ``load_settings`` reads it by the field's
    type like an ``EDGEBOX_*`` variable, so a bad value is a settings problem
    naming the flag (exit 78), and a bool takes Triton's ``true``/``false``
    (or ``1``/``0``, ``yes``/``no``, ``on``/``off``). The flag's default is
    "not given" (``SUPPRESS``), so only flags the user gave reach the layers.
    The help is the field's ``metadata["help"]``, else the first sentence of
    its docstring, then its default (or ``metadata["default_help"]``, for an
    empty default that stands for one worked out at start);
    ``metadata["choices"]`` and ``metadata["metavar"]`` pass through to
    argparse."""
    docs = _field_docs(cls)
    hints = field_types(cls)
    special = special or {}
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        if field.name in special:
            parser.add_argument(flag, default=argparse.SUPPRESS, **special[field.name])
            continue
        if not _is_scalar(hints[field.name]):
            continue
        text = field.metadata.get("help") or _first_sentence(docs.get(field.name, field.name))
        extra = {
            key: field.metadata[key] for key in ("choices", "metavar") if key in field.metadata
        }
        shown = field.metadata.get("default_help") or _shown(field.default)
        parser.add_argument(
            flag,
            default=argparse.SUPPRESS,
            help=f"{text} (default: {shown})".replace("%", "%%"),
            **extra,
        )


def _is_scalar(hint: Any) -> bool:
    """A scalar, or a scalar or None: what one flag's text can hold."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    return hint in _SCALARS


def _shown(default: Any) -> str:
    """A default as a user would type it: ``true``, ``none``, ``empty``."""
    if isinstance(default, bool):
        return str(default).lower()
    return "none" if default is None else "empty" if default == "" else str(default)


def _field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under its line in the class body),
    read from the source; empty when the source is not installed, and the
    flags' help falls back to the field names."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    docs = {}
    for node, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = after.value.value
    return docs


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split()).replace("``", "")
    match = re.match(r"(.+?[.!?])(?:\s|$)", text)
    return match.group(1) if match else text


def add_section_flags(serve: argparse.ArgumentParser) -> None:
    """``--<section>-<field>`` for every field of every settings section; each
    one given sets that field alone (and turns the section on)."""
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            shown = field.metadata.get("default_help") or _shown(field.default)
            serve.add_argument(
                f"--{section}-{field.name.replace('_', '-')}",
                default=argparse.SUPPRESS,
                metavar=field.name.upper(),
                help=f"{section}.{field.name} (default: {shown}); see docs/configuration.md",
            )
