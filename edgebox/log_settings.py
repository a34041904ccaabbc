"""The daemon's log settings as Triton's ``logging`` extension shows them, and
the one place that changes them at run time.

Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_logging.md

A change is applied to Python's logging for the ``edgebox`` logger tree:
``log_verbose_level`` > 0 lets DEBUG records through, and ``log_info``,
``log_warning`` and ``log_error`` each let INFO, WARNING and ERROR (and
CRITICAL) records through. Records of other libraries are untouched.
``log_file`` is never changed over the network: edgebox logs to stderr (the
journal under systemd), and a client must not make the daemon write to a path
it chose. ``log_format`` is always ``default``.

Thread-safe: HTTP connection threads and the gRPC worker pool call it at once;
an update is checked whole before any of it is applied.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from edgebox.errors import InvalidArgument, Unsupported
from edgebox.extension_settings import known_changes

LOGGER_NAME = "edgebox"
"""The logger tree the settings govern."""

_BOOL_KEYS = ("log_info", "log_warning", "log_error")
_KNOWN_KEYS = ("log_file", *_BOOL_KEYS, "log_verbose_level", "log_format")


class _LevelSwitch(logging.Filter):
    """Drops ``edgebox`` records whose level is switched off. Installed on the
    root logger's handlers, because a logger's own filters never see the
    records its children propagate."""

    def __init__(self) -> None:
        super().__init__()
        self.enabled = {"debug": False, "info": True, "warning": True, "error": True}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != LOGGER_NAME and not record.name.startswith(LOGGER_NAME + "."):
            return True
        if record.levelno >= logging.ERROR:
            return self.enabled["error"]
        if record.levelno >= logging.WARNING:
            return self.enabled["warning"]
        if record.levelno >= logging.INFO:
            return self.enabled["info"]
        return self.enabled["debug"]


class LogSettings:
    """Current values, starting from what logging does when it is built
    (``cli`` configures logging from the ``log_verbose`` setting first):
    verbose level 1 when the ``edgebox`` logger lets DEBUG through, else 0."""

    def __init__(self, verbose_level: int | None = None) -> None:
        if verbose_level is None:
            verbose_level = int(logging.getLogger(LOGGER_NAME).isEnabledFor(logging.DEBUG))
        self._lock = threading.Lock()
        self._switch = _LevelSwitch()
        self._values: dict[str, Any] = {
            "log_file": "",
            "log_info": True,
            "log_warning": True,
            "log_error": True,
            "log_verbose_level": verbose_level,
            "log_format": "default",
        }

    def current(self) -> dict[str, Any]:
        """The settings in Triton's key order."""
        with self._lock:
            return dict(self._values)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Applies ``changes`` (a key with value None is left as it is, as
        Triton does) and answers the settings after it. InvalidArgument for an
        unknown key or a wrong type, Unsupported for ``log_file`` and a format
        edgebox does not write; nothing is applied then."""
        checked = _checked(changes)
        with self._lock:
            self._values.update(checked)
            self._apply()
            return dict(self._values)

    def _apply(self) -> None:
        values = self._values
        switch = self._switch
        switch.enabled = {
            "debug": values["log_verbose_level"] > 0,
            "info": values["log_info"],
            "warning": values["log_warning"],
            "error": values["log_error"],
        }
        logger = logging.getLogger(LOGGER_NAME)
        logger.setLevel(logging.DEBUG if switch.enabled["debug"] else logging.INFO)
        for handler in logging.getLogger().handlers:
            handler.addFilter(switch)


def _checked(changes: dict[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in known_changes("log settings", changes, _KNOWN_KEYS):
        if value is None:
            continue
        if key == "log_file":
            raise Unsupported(
                "log settings: 'log_file' cannot be changed over the network "
                "(edgebox logs to stderr, the journal under systemd)"
            )
        if key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise InvalidArgument(
                    f"log settings: '{key}' expected true or false, got {value!r}"
                )
        elif key == "log_verbose_level":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(
                    f"log settings: 'log_verbose_level' expected an integer >= 0, got {value!r}"
                )
        elif key == "log_format":
            if value == "ISO8601":
                raise Unsupported(
                    "log settings: 'log_format' 'ISO8601' is not supported; "
                    "edgebox writes only 'default'"
                )
            if value != "default":
                raise InvalidArgument(
                    f"log settings: 'log_format' expected 'default', got {value!r}"
                )
        checked[key] = value
    return checked
