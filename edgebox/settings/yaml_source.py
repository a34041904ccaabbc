"""YAML as the settings read it: the file with the line of every key (so each
problem can start with ``FILE:LINE:``), and a section given as YAML text in
one environment variable (``EDGEBOX_STREAMS``, ``EDGEBOX_MQTT``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from edgebox.settings.problems import SettingsError, SettingsProblem

KeyLines = dict[tuple[str, ...], int]
"""The line of each key down to three levels, list items counted by their
index: ``("mqtt", "qos")`` -> 12, ``("streams", "0", "fps")`` -> 20,
``("streams", "0")`` -> the entry's first line."""


def read_yaml(path: Path) -> tuple[dict[str, Any], KeyLines]:
    """The document and its key lines. A file that cannot be read or parsed,
    or whose top level is no mapping, is one problem: nothing else in it can
    be judged."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read configuration file '{path}': {exc.strerror}") from None
    try:
        document = yaml.safe_load(text) or {}
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = SettingsProblem(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}")
        raise SettingsError([problem]) from None
    if not isinstance(document, dict):
        raise SettingsError(f"{path}: the top level must be a mapping of setting: value")
    lines: KeyLines = {}

    def walk(node: yaml.Node | None, keys: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [(str(key.value), key, value) for key, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(str(index), item, item) for index, item in enumerate(node.value)]
        else:
            return
        for name, marked, child in children:
            lines[(*keys, name)] = marked.start_mark.line + 1
            if len(keys) < 2:
                walk(child, (*keys, name))

    walk(root, ())
    return document, lines


def yaml_text(key: str, value: Any, source: str) -> Any:
    """A section given as YAML text parsed; any other value as it is (the
    file's YAML is already parsed)."""
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise SettingsError(
            f"setting '{key}' from {source}: not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
