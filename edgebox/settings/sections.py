"""A settings section read field by field, whatever its class: the contract
between the loader and the settings dataclasses that live in their packages
(``mqtt/settings.py``, ``dashboard/settings.py``, ``streams/settings.py``, ...).

A section class is a frozen dataclass whose fields are read by their type
(``conversion.convert``). It may add:

- ``parse_field(name, raw, coerce)``: read a raw value itself (raise
  ValueError saying what was expected); ``coerce`` is the reading by type;
- ``problems()``: yield ``(field, message)`` for each thing wrong with the
  whole, judged after every field was read;
- for a list section, ``ENTRY_KEYS`` (named when an entry is not a mapping)
  and ``entries_problem(entries)``: ``(index, field, message)`` for what is
  wrong between entries, or None.

So a section validates itself, and this module only says where each problem
is: the setting's dotted name, its source, its line in the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from edgebox.settings.conversion import convert, field_types
from edgebox.settings.problems import Place, SettingsError, SettingsProblem, did_you_mean, problem
from edgebox.settings.yaml_source import yaml_text


def check_keys(
    cls: type,
    entry: Any,
    where: str,
    source: str,
    required: bool,
    place: Callable[[tuple[str, ...]], Place] = lambda _keys: None,
) -> list[SettingsProblem]:
    """The problems with ``entry`` as a mapping of ``cls``'s fields (with the
    required ones when ``required``): each unknown key, each missing one.
    ``where`` names it (``mqtt``, ``streams[0]``); ``place(())`` locates the
    entry, ``place((key,))`` one of its keys."""
    fields = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(entry, dict):
        keys = getattr(cls, "ENTRY_KEYS", None)
        expected = f"with {', '.join(keys)}" if keys else f"of {where} settings"
        detail = f"expected a mapping {expected}, got {entry!r}"
        return [problem(where, source, detail, place(()))]
    problems = [
        problem(
            where,
            source,
            f"unknown key '{key}'{did_you_mean(str(key), fields)}",
            place((str(key),)),
        )
        for key in entry
        if key not in fields
    ]
    if required:
        problems += [
            problem(where, source, f"missing required key '{field.name}'", place(()))
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.name not in entry
        ]
    return problems


def field_value(
    cls: type, dotted: str, name: str, raw: Any, source: str, place: Place = None
) -> Any:
    """One field of ``cls`` (a section, or ``Settings`` itself), through the
    class's ``parse_field`` if it has one, else read by the field's type;
    SettingsError names ``dotted`` and ``source``."""
    kind = field_types(cls)[name]

    def coerce(value: Any) -> Any:
        return convert(kind, value)

    parse = getattr(cls, "parse_field", None)
    try:
        return parse(name, raw, coerce) if parse else coerce(raw)
    except ValueError as exc:
        raise SettingsError([problem(dotted, source, str(exc), place)]) from None


def build(
    cls: type,
    fields: dict[str, Any],
    where: str,
    shown: Mapping[str, str],
    place: Callable[[str], Place] = lambda _name: None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> tuple[Any, list[SettingsProblem]]:
    """A section's dataclass and what its ``problems()`` (if any) found, but
    for fields in ``skip`` (their given value already failed, so the default
    in their place is not judged). ``shown`` holds the source of each dotted
    field that was given; the others are named as defaults."""
    section = cls(**fields)
    problems = []
    for name, message in getattr(section, "problems", lambda: ())():
        if name in skip:
            continue
        dotted = f"{where}.{name}"
        if dotted in shown:
            problems.append(problem(dotted, shown[dotted], message, place(name)))
        else:
            problems.append(problem(dotted, "default", message, paren=True))
    return section, problems


def entries(
    key: str, cls: type, value: Any, source: str, at: Callable[..., Place]
) -> tuple[Any, ...]:
    """A list section (``streams``) from YAML (a list of mappings) or from text
    holding such a list (the environment); every problem of every entry names
    the entry and its key (and, from the file, its line: ``at(key, index,
    field)``)."""
    value = yaml_text(key, value, source)
    if not isinstance(value, list):
        keys = ", ".join(getattr(cls, "ENTRY_KEYS", ()))
        detail = f"expected a list of {key} (each with {keys}), got {value!r}"
        raise SettingsError([problem(key, source, detail, at(key))])
    built_entries = []
    problems: list[SettingsProblem] = []
    for index, entry in enumerate(value):
        where = f"{key}[{index}]"

        def place(keys: tuple[str, ...], index: int = index) -> Place:
            return at(key, str(index), *keys)

        found = check_keys(cls, entry, where, source, True, place)
        problems += found
        if not isinstance(entry, dict):
            continue
        fields = {}
        for field in dataclasses.fields(cls):
            if field.name not in entry:
                continue
            try:
                fields[field.name] = field_value(
                    cls,
                    f"{where}.{field.name}",
                    field.name,
                    entry[field.name],
                    source,
                    place((field.name,)),
                )
            except SettingsError as exc:
                problems += exc.problems
                found.append(exc.problems[0])
        if found:
            continue
        built, found = build(
            cls,
            fields,
            where,
            {f"{where}.{name}": source for name in fields},
            lambda name, place=place: place((name,)),
        )
        problems += found
        built_entries.append((index, built))
    between = getattr(cls, "entries_problem", lambda _entries: None)(
        tuple(built for _, built in built_entries)
    )
    if between is not None:
        position, name, message = between
        index = built_entries[position][0]
        problems.append(
            problem(f"{key}[{index}].{name}", source, message, at(key, str(index), name))
        )
    if problems:
        raise SettingsError(problems)
    return tuple(built for _, built in built_entries)
