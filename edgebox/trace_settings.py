"""Trace settings in the shape of Triton's ``trace`` extension. edgebox does not
trace requests: ``trace_level`` is always ``["OFF"]``, and asking for any
other level is refused with a message that says so.

Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_trace.md

``trace_rate``, ``trace_count`` and ``log_frequency`` are checked and kept, as
Triton keeps them, so a client that sets them reads them back; they change
nothing while tracing is off. ``trace_file`` is never changed over the
network (a client must not make the daemon write to a path it chose) and
``trace_mode`` is always ``triton``.

A model's settings are the global ones overlaid with that model's own; a
model key set to None (gRPC: an empty value list) goes back to following the
global value. Thread-safe: both transports call it at once.
"""

from __future__ import annotations

import threading
from typing import Any

from edgebox.errors import InvalidArgument, Unsupported
from edgebox.extension_settings import known_changes

DEFAULTS: dict[str, Any] = {
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_file": "",
    "trace_mode": "triton",
}
"""Triton 2.51's answer when started without trace flags, in its key order."""

_NUMBERS = ("trace_rate", "trace_count", "log_frequency")


class TraceSettings:
    """Global settings and per-model overrides."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._global = dict(DEFAULTS)
        self._models: dict[str, dict[str, Any]] = {}

    def current(self, model: str = "") -> dict[str, Any]:
        """The settings ``model`` runs with (the global ones for "")."""
        with self._lock:
            return self._view(model)

    def update(self, model: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Applies ``changes`` to ``model`` ("" for the global settings) and
        answers the settings after it. InvalidArgument for an unknown key or a
        malformed value, Unsupported for a level other than OFF, a trace file
        or another mode; nothing is applied then."""
        where = f"model '{model}' trace settings" if model else "trace settings"
        checked = _checked(where, changes)
        with self._lock:
            target = self._models.setdefault(model, {}) if model else self._global
            for key, value in checked.items():
                if value is not None:
                    target[key] = value
                elif model:
                    target.pop(key, None)
                else:
                    target[key] = DEFAULTS[key]
            return self._view(model)

    def _view(self, model: str) -> dict[str, Any]:
        view = {**self._global, **self._models.get(model, {})} if model else dict(self._global)
        view["trace_level"] = list(view["trace_level"])
        return view


def _checked(where: str, changes: dict[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in known_changes(where, changes, tuple(DEFAULTS)):
        if value is None or value == []:
            checked[key] = None
            continue
        if key == "trace_level":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidArgument(
                    f"{where}: 'trace_level' expected a list of strings, got {value!r}"
                )
            if value != ["OFF"]:
                raise Unsupported(
                    f"{where}: tracing is not supported by edgebox; 'trace_level' accepts "
                    f"only ['OFF'], got {value!r}"
                )
            checked[key] = ["OFF"]
            continue
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            raise InvalidArgument(f"{where}: '{key}' expected a string, got {value!r}")
        if key == "trace_file":
            raise Unsupported(f"{where}: 'trace_file' cannot be changed over the network")
        if key == "trace_mode" and value != "triton":
            raise Unsupported(
                f"{where}: 'trace_mode' accepts only 'triton' (tracing is not supported), "
                f"got {value!r}"
            )
        if key in _NUMBERS:
            try:
                number = int(value)
            except ValueError:
                number = None
            if number is None or number < (-1 if key == "trace_count" else 0):
                raise InvalidArgument(
                    f"{where}: '{key}' expected an integer "
                    f"{'>= -1' if key == 'trace_count' else '>= 0'} as a string, got {value!r}"
                )
            value = str(number)
        checked[key] = value
    return checked
