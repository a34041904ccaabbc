"""What the entries of a model repository may be named: the one home of each
naming rule, so the scanner, the load and unload requests, the dashboard's
rollback, ``edgebox publish`` and ``edgebox build-engine`` never disagree.

* A model name is one folder name inside the repository
  (``model_name_problem``): not empty, ``.`` or ``..``, without ``/`` or NUL,
  and at most ``NAME_MAX`` bytes in UTF-8. ``..`` or ``a/b`` would lead the
  daemon to read a config and run a model.py outside the repository; a longer
  name cannot be a folder at all.
* The scanner passes over hidden entries and those still being copied
  (``is_ignored``). A command that writes a new model refuses such a name as
  well (``new_model_name_problem``), since the daemon would never see what it
  wrote; a load request for one is not refused here: it names a folder that
  either is there or is not.
* A version folder is named with a positive integer without a leading zero
  (``version_number``), as in Triton.
"""

from __future__ import annotations

from edgebox.errors import InvalidArgument

NAME_MAX = 255
"""Linux's limit on one path segment; a longer name cannot be a folder."""

IGNORED_SUFFIXES = (".tmp", ".partial")
"""Folders still being copied, by the naming convention ``edgebox publish`` uses."""

_TOO_LONG = "too long"
_EMPTY = "empty"
_SEPARATOR = "separator"
_DOT = "dot"


def is_ignored(name: str) -> bool:
    return name.startswith(".") or name.endswith(IGNORED_SUFFIXES)


def version_number(name: str) -> int | None:
    # str.isdigit() also accepts superscripts (int() raises) and Arabic-Indic digits.
    if name.isascii() and name.isdigit() and not name.startswith("0"):
        return int(name)
    return None


def model_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a model name, or None. The repository extension
    (load and unload requests), the scanner and ensemble steps apply it."""
    fault = _fault(name)
    if fault is None:
        return None
    if fault == _TOO_LONG:
        return _too_long(name)
    shown = name.replace("\0", "\\0")
    return (
        f"model name '{shown}': expected a single folder name (not '.' or '..', without '/' or NUL)"
    )


def check_model_name(name: str) -> None:
    """Raise InvalidArgument when ``name`` is not a single folder name."""
    problem = model_name_problem(name)
    if problem is not None:
        raise InvalidArgument(problem)


def new_model_name_problem(name: str, flag: str = "") -> str | None:
    """Why a command may not write a model called ``name``: the model-name
    rule, and no name the scanner ignores. Worded for the command line:
    ``flag`` is the option the name came from (``--model``), empty for
    ``edgebox publish``'s argument."""
    fault = _fault(name)
    prefix = f"{flag}: " if flag else ""
    subject = f"{flag} '{name}'" if flag else f"model name '{name}'"
    if fault == _TOO_LONG:
        return prefix + _too_long(name)
    if fault == _EMPTY:
        return prefix + "model name is empty"
    if fault == _SEPARATOR:
        return f"{subject}: {'a model name ' if flag else ''}must not contain '/'"
    if fault == _DOT or is_ignored(name):
        return (
            f"{subject}: names starting with '.' or ending with "
            f"{' or '.join(IGNORED_SUFFIXES)} are ignored by the repository"
        )
    return None


def check_new_model_name(name: str, flag: str = "") -> None:
    """Raise InvalidArgument when a command may not write a model called ``name``."""
    problem = new_model_name_problem(name, flag)
    if problem is not None:
        raise InvalidArgument(problem)


def _fault(name: str) -> str | None:
    """Which clause of the model-name rule ``name`` breaks first, or None."""
    if len(name.encode("utf-8", "surrogatepass")) > NAME_MAX:
        return _TOO_LONG
    if not name:
        return _EMPTY
    if "/" in name or "\0" in name:
        return _SEPARATOR
    if name in (".", ".."):
        return _DOT
    return None


def _too_long(name: str) -> str:
    return f"model name '{name[:32]}...': longer than {NAME_MAX} bytes, the longest folder name"
