"""The settings layered: defaults -> the YAML file (``/etc/edgebox/edgebox.yaml``,
or ``--config FILE``) -> ``EDGEBOX_<NAME>`` environment variables ->
command-line flags, later ones winning.

A mapping section (``mqtt``, ``dashboard``, ``telemetry``) is merged field by
field across layers (``mqtt: {qos: 2}``, ``EDGEBOX_MQTT_QOS``,
``--mqtt-qos``); a list section (``streams``) is given whole by one layer.
Every problem in every layer is collected, each named with its source (and
its line, from the file), and an unknown key gets a "did you mean"; nothing
falls back silently.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgebox.settings.conversion import field_types
from edgebox.settings.problems import (
    Place,
    SettingsError,
    SettingsProblem,
    did_you_mean,
    nowhere,
    problem,
)
from edgebox.settings.sections import build, check_keys, entries, field_value
from edgebox.settings.top_level import Settings
from edgebox.settings.yaml_source import read_yaml, yaml_text

DEFAULT_CONFIG_FILE = Path("/etc/edgebox/edgebox.yaml")


def _dataclass_in(hint: Any) -> type | None:
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
SECTIONS: dict[str, type] = {
    name: cls
    for name, hint in field_types(Settings).items()
    if typing.get_origin(hint) is not tuple and (cls := _dataclass_in(hint)) is not None
}
"""Mapping sections (``mqtt``): the field name and its settings dataclass."""
_LIST_SECTIONS: dict[str, type] = {
    name: cls
    for name, hint in field_types(Settings).items()
    if typing.get_origin(hint) is tuple and (cls := _dataclass_in(hint)) is not None
}
_SECTION_FIELDS: dict[str, tuple[str, str]] = {
    f"{section}_{field.name}": (section, field.name)
    for section, cls in SECTIONS.items()
    for field in dataclasses.fields(cls)
}
"""``mqtt_qos`` (from ``EDGEBOX_MQTT_QOS`` or ``--mqtt-qos``) -> ``("mqtt", "qos")``."""


def load_settings(
    flags: Mapping[str, Any],
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from the layers; ``flags`` holds only flags the user gave.
    SettingsError lists every problem in every layer; a value that failed is
    not judged again through its default (no second, misleading problem)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    sections: dict[str, dict[str, Any]] = {}
    shown: dict[str, str] = {}  # "mqtt.qos" -> its source with the YAML line, for messages
    places: dict[str, Place] = {}  # "http_port", "mqtt.qos" -> where in the file, if there
    problems: list[SettingsProblem] = []
    failed: set[str] = set()
    environ = os.environ if environ is None else environ

    def collect(key: str, error: SettingsError) -> None:
        problems.extend(error.problems)
        failed.add(key)

    def set_field(
        section: str, name: str, raw: Any, source: str, where: str, place: Place = None
    ) -> None:
        dotted = f"{section}.{name}"
        fields = sections.setdefault(section, {})
        failed.discard(dotted)
        try:
            fields[name] = field_value(SECTIONS[section], dotted, name, raw, where, place)
        except SettingsError as exc:
            collect(dotted, exc)
            fields.pop(name, None)
        sources[dotted] = source
        shown[dotted] = where
        places[dotted] = place

    def set_section(
        section: str,
        value: Any,
        source: str,
        where: Callable[[str | None], str],
        at: Callable[..., Place] = nowhere,
    ) -> None:
        sections.setdefault(section, {})
        if value is None:  # ``mqtt:`` with every field commented out: on, with the defaults
            return
        cls = SECTIONS[section]
        problems.extend(
            check_keys(cls, value, section, where(None), False, lambda name: at(section, *name))
        )
        if not isinstance(value, dict):
            failed.add(section)
            return
        known = {f.name for f in dataclasses.fields(cls)}
        for name, raw in value.items():
            if name in known:
                set_field(section, name, raw, source, where(name), at(section, name))

    def set_value(key: str, value: Any, source: str, at: Callable[..., Place] = nowhere) -> None:
        failed.discard(key)
        try:
            if key in _LIST_SECTIONS:
                values[key] = entries(key, _LIST_SECTIONS[key], value, source, at)
            else:
                values[key] = field_value(Settings, key, key, value, source, at(key))
        except SettingsError as exc:
            collect(key, exc)
        sources[key] = source
        places[key] = at(key)

    path = config_file or DEFAULT_CONFIG_FILE
    if config_file is not None or path.exists():
        document, lines = read_yaml(path)

        def at(*keys: str) -> Place:
            line = lines.get(keys)
            return (str(path), line) if line else None

        for key, value in document.items():
            if key not in _FIELDS:
                detail = _unknown(str(key), str(key))
                place = at(str(key))
                problems.append(
                    SettingsProblem(
                        f"{path}: {detail}", str(path), place and place[1], None, detail
                    )
                )
                continue
            if key in SECTIONS:

                def where(name: str | None, key: str = key) -> str:
                    line = lines.get((key, name) if name else (key,))
                    return f"{path}:{line}" if line else str(path)

                set_section(key, value, str(path), where, at)
                continue
            set_value(key, value, str(path), at)
    for env_name, text in environ.items():
        if not env_name.startswith("EDGEBOX_"):
            continue
        key = env_name.removeprefix("EDGEBOX_").lower()
        if key in SECTIONS:
            try:
                mapping = yaml_text(key, text, env_name)
            except SettingsError as exc:
                collect(key, exc)
                continue
            set_section(key, mapping, env_name, lambda _name, env_name=env_name: env_name)
        elif key in _SECTION_FIELDS:
            set_field(*_SECTION_FIELDS[key], text, env_name, env_name)
        elif key in _FIELDS:
            set_value(key, text, env_name)
        else:
            problems.append(SettingsProblem(_unknown(key, env_name)))
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if key in _SECTION_FIELDS:
            set_field(*_SECTION_FIELDS[key], value, flag, flag)
            continue
        set_value(key, value, flag)

    for section, fields in sections.items():
        skip = {
            f.name for f in dataclasses.fields(SECTIONS[section]) if f"{section}.{f.name}" in failed
        }
        values[section], found = build(
            SECTIONS[section],
            fields,
            section,
            shown,
            lambda name, section=section: places.get(f"{section}.{name}"),
            skip,
        )
        problems.extend(found)
    settings = Settings(**values)
    object.__setattr__(settings, "_sources", sources)
    problems.extend(_judged(settings, sources, places, failed))
    if problems:
        problems.sort(key=lambda problem: (problem.line is None, problem.line or 0))
        raise SettingsError(problems)
    return settings


def _judged(
    settings: Settings,
    sources: Mapping[str, str],
    places: Mapping[str, Place],
    failed: set[str],
) -> list[SettingsProblem]:
    """What ``Settings.problems()`` finds, each named with its source and
    line, but for a check that involves a setting in ``failed`` (its given
    value could not be read, so the default stands in) or one that already
    has a problem here: one mistake, one problem."""
    found: list[SettingsProblem] = []
    bad = set(failed)
    for key, message, involves in settings.problems():
        if bad.intersection((key, *involves)):
            continue
        bad.add(key)
        source, place = sources.get(key, "default"), places.get(key)
        if key in SECTIONS and key not in sources:
            # A whole section at fault (``fleet`` without ``mqtt``): named by
            # where its first given field came from.
            given = next((name for name in sources if name.startswith(f"{key}.")), None)
            if given is not None:
                source, place = sources[given], places.get(given)
        found.append(problem(key, source, message, place, paren=True))
    return found


def _unknown(key: str, shown: str) -> str:
    hint = did_you_mean(key, [*_FIELDS, *_SECTION_FIELDS])
    for flat, (section, name) in _SECTION_FIELDS.items():
        hint = hint.replace(f"'{flat}'", f"'{section}.{name}'")
    return f"unknown setting '{shown}'{hint}"
