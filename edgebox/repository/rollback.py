"""Rolling a model back to an earlier version folder, and restoring it, by
moving version folders inside the model folder (the dashboard's rollback in
poll mode, docs/dashboard.md).

In poll mode the repository folder is the truth, so a rollback does what an
operator would do by hand: every version folder newer than the one asked for
is renamed from ``<model>/<v>`` to ``<model>/.rolled-back/<v>``. The scanner
ignores hidden entries (``names.is_ignored``), so the poller unloads the
parked versions and the model's ``version_policy`` serves the older one again.
``restore`` renames them back.

Rules:

* Every move is one ``os.rename`` inside the model folder: atomic, never a
  copy, and nothing is ever deleted (the parked folder itself is removed only
  once empty, with ``os.rmdir``, which cannot remove anything else).
* Every refusal is checked before the first move, so a refused call moves
  nothing. Should a rename fail midway (the disk, not the caller), the moves
  already made are undone before the error is raised.
* Newer versions are parked oldest first and restored newest first, so the
  newest folder stays in place until the last move: a poll between two moves
  never sees a version in between it would load and then drop again.
* Names are checked before a path is built from them: the model name is one
  folder the scanner sees (``model_folder``), a version a plain number
  (``parse_version``).

Not safe against a concurrent call on the same model: the caller serialises
(``RepositoryControl`` holds a lock). The poller may scan at any time; see above.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, NotFound, Unavailable
from edgebox.repository.layout import scan_model
from edgebox.repository.names import check_model_name, is_ignored, version_number

log = logging.getLogger(__name__)

ROLLED_BACK = ".rolled-back"
"""Where parked version folders go, inside the model folder; hidden, so never
scanned as a version."""


class VersionFolders(NamedTuple):
    versions: tuple[int, ...]
    """Version folders in place, ascending."""
    rolled_back: tuple[int, ...]
    """Version folders parked in ``.rolled-back``, ascending."""


def model_folder(root: Path, name: str) -> Path:
    """``root / name`` once ``name`` is known to be a model folder the scanner
    reads: InvalidArgument when it is not a single folder name, NotFound when
    no such folder is there (or it is hidden or still being copied)."""
    check_model_name(name)
    path = root / name
    if is_ignored(name) or not path.is_dir():
        raise NotFound(f"unknown model '{name}': no such model folder")
    return path


def parse_version(value: object, where: str) -> int:
    """A version number from a request: an integer, or its digits as a string,
    positive and without a leading zero (the rule for version folder names).
    Raises InvalidArgument for anything else, so no path is built from it."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        number = value
    elif isinstance(value, str):
        number = version_number(value)
    if number is None:
        raise InvalidArgument(
            f"{where}: 'version': expected a version number "
            f"(a positive integer without a leading zero), got {value!r}"
        )
    return number


def version_folders(model_dir: Path) -> VersionFolders:
    """The version folders in place and those parked; unreadable folders read
    as empty."""
    in_place = tuple(scan_model(model_dir, fingerprints=False).versions)
    return VersionFolders(in_place, tuple(sorted(_parked(model_dir))))


def roll_back(model_dir: Path, version: int) -> list[int]:
    """Park every version folder newer than ``version``; returns those moved,
    ascending. ``version`` must be a version folder in place, older than the
    newest (InvalidArgument otherwise); a parked folder of the same number
    already there refuses the whole call (ALREADY_EXISTS)."""
    where = f"model '{model_dir.name}' rollback"
    in_place = list(scan_model(model_dir, fingerprints=False).versions)
    if version not in in_place:
        listed = ", ".join(str(v) for v in in_place) or "none"
        raise InvalidArgument(
            f"{where}: version {version} has no version folder; expected one of {listed}"
        )
    newer = [v for v in in_place if v > version]
    if not newer:
        raise InvalidArgument(
            f"{where}: version {version} is the newest version folder; expected an older one"
        )
    parked_dir = model_dir / ROLLED_BACK
    if parked_dir.exists() and not parked_dir.is_dir():
        raise EdgeboxError(
            f"{where}: '{ROLLED_BACK}' exists and is not a folder; move it away first",
            ErrorCode.ALREADY_EXISTS,
        )
    for v in newer:
        if os.path.lexists(parked_dir / str(v)):
            raise EdgeboxError(
                f"{where}: '{ROLLED_BACK}/{v}' already exists; restore it or move it away first",
                ErrorCode.ALREADY_EXISTS,
            )
    try:
        parked_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise Unavailable(f"{where}: cannot make '{ROLLED_BACK}': {exc.strerror}") from exc
    _move_all(where, [(model_dir / str(v), parked_dir / str(v)) for v in newer])
    return newer


def restore(model_dir: Path) -> list[int]:
    """Move every parked version folder back; returns those moved, ascending.
    Nothing parked is refused (UNSUPPORTED), and so is a version folder that
    is in place again (ALREADY_EXISTS): which of the two to keep is the
    operator's call."""
    where = f"model '{model_dir.name}' restore"
    parked = sorted(_parked(model_dir))
    if not parked:
        raise EdgeboxError(
            f"{where}: nothing to restore (no rolled-back version)", ErrorCode.UNSUPPORTED
        )
    for v in parked:
        if os.path.lexists(model_dir / str(v)):
            raise EdgeboxError(
                f"{where}: version folder '{v}' exists again; "
                f"move it or '{ROLLED_BACK}/{v}' away first",
                ErrorCode.ALREADY_EXISTS,
            )
    parked_dir = model_dir / ROLLED_BACK
    _move_all(where, [(parked_dir / str(v), model_dir / str(v)) for v in reversed(parked)])
    try:
        parked_dir.rmdir()
    except OSError:
        pass  # something else is kept there: leave it
    return parked


def _parked(model_dir: Path) -> list[int]:
    try:
        entries = list(os.scandir(model_dir / ROLLED_BACK))
    except OSError:
        return []
    numbers = []
    for entry in entries:
        number = version_number(entry.name)
        if number is not None and entry.is_dir():
            numbers.append(number)
    return numbers


def _move_all(where: str, moves: list[tuple[Path, Path]]) -> None:
    """Rename each (source, target) in order; on a failure, undo the renames
    already made (newest first) and raise Unavailable."""
    done: list[tuple[Path, Path]] = []
    for source, target in moves:
        try:
            os.rename(source, target)
        except OSError as exc:
            for made_source, made_target in reversed(done):
                try:
                    os.rename(made_target, made_source)
                except OSError as undo:
                    log.error(
                        "%s: cannot move '%s' back to '%s': %s",
                        where,
                        made_target,
                        made_source,
                        undo.strerror,
                    )
            raise Unavailable(
                f"{where}: cannot move '{source.name}' to '{target}': {exc.strerror}; "
                "the moves already made were undone"
            ) from exc
        done.append((source, target))
