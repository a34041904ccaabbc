"""What the repository folder holds: model folders, their config, their version
folders, and a fingerprint of each so a poller can tell what changed.

Layout: ``<root>/<model>/config.pbtxt`` and ``<root>/<model>/<N>/`` for each
version; the config may be left out, as in Triton (see ``config.model_folder_config``:
the model file then tells the backend). As in Triton, version folders must be
named with a positive integer without a leading zero; anything else is ignored
(with a debug line), as are hidden entries and stray files.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from edgebox.repository.config import CONFIG_FILENAME
from edgebox.repository.names import is_ignored, model_name_problem, version_number

log = logging.getLogger(__name__)

Fingerprint = tuple[tuple[str, int, int, int], ...]
"""(relative path, size, mtime_ns, ctime_ns) of every file, sorted."""


@dataclass(frozen=True)
class VersionFolder:
    number: int
    path: Path
    fingerprint: Fingerprint = ()
    renamed_in: bool = False
    """The folder was renamed into place after it was filled (see ``renamed_in``)."""


@dataclass(frozen=True)
class ModelFolder:
    name: str
    path: Path
    config_fingerprint: Fingerprint = ()
    versions: dict[int, VersionFolder] = field(default_factory=dict)
    renamed_in: bool = False


@dataclass(frozen=True)
class RepositorySnapshot:
    root: Path
    models: dict[str, ModelFolder]


def scan_repository(root: Path, fingerprints: bool = True) -> RepositorySnapshot:
    """Read the repository's current state; unreadable entries are skipped with
    a warning rather than failing the whole scan."""
    models: dict[str, ModelFolder] = {}
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        log.error("cannot read model repository '%s': %s", root, exc)
        return RepositorySnapshot(root, {})
    for entry in entries:
        if is_ignored(entry.name):
            log.debug("repository: ignoring hidden or partial entry '%s'", entry.path)
            continue
        if not entry.is_dir():
            log.debug("repository: ignoring stray file '%s'", entry.path)
            continue
        problem = model_name_problem(entry.name)
        if problem is not None:
            log.warning("repository: ignoring '%s': %s", entry.path, problem)
            continue
        models[entry.name] = scan_model(Path(entry.path), fingerprints)
    return RepositorySnapshot(root, models)


def scan_model(model_dir: Path, fingerprints: bool = True) -> ModelFolder:
    versions: dict[int, VersionFolder] = {}
    try:
        entries = list(os.scandir(model_dir))
    except OSError as exc:
        log.warning("cannot read model folder '%s': %s", model_dir, exc)
        entries = []
    for entry in entries:
        if entry.name == CONFIG_FILENAME or is_ignored(entry.name):
            continue
        number = version_number(entry.name)
        if number is None or not entry.is_dir():
            log.debug("repository: ignoring '%s' (not a version folder)", entry.path)
            continue
        path = Path(entry.path)
        versions[number] = VersionFolder(
            number,
            path,
            _fingerprint(path) if fingerprints else (),
            renamed_in(path) if fingerprints else False,
        )
    config_path = model_dir / CONFIG_FILENAME
    config_print = _file_print(config_path, CONFIG_FILENAME) if fingerprints else ()
    return ModelFolder(
        model_dir.name,
        model_dir,
        config_print,
        dict(sorted(versions.items())),
        renamed_in(model_dir) if fingerprints else False,
    )


def renamed_in(folder: Path) -> bool:
    """Whether ``folder`` was renamed after its last entry changed: a rename
    updates a folder's ctime but not its mtime, while creating or removing
    entries updates both alike. That is the mark of a folder staged elsewhere
    (``edgebox publish``, ``cp`` to a hidden name then ``mv``) and then moved
    into place complete."""
    try:
        stat = os.stat(folder)
    except OSError:
        return False
    return stat.st_ctime_ns > stat.st_mtime_ns


def _file_print(path: Path, name: str) -> Fingerprint:
    try:
        stat = path.stat()
    except OSError:
        return ()
    return ((name, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns),)


def _fingerprint(folder: Path) -> Fingerprint:
    """Every file below ``folder``; a copy in progress changes it, a finished
    one leaves it alone. ``__pycache__`` is left out: importing model.py writes it."""
    prints: list[tuple[str, int, int, int]] = []
    try:
        own = os.stat(folder)
        # The folder's own ctime is left out: renaming the folder into place changes it.
        prints.append((".", 0, own.st_mtime_ns, own.st_mtime_ns))
    except OSError:
        return ()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for filename in filenames:
            path = os.path.join(dirpath, filename)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            prints.append(
                (os.path.relpath(path, folder), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            )
    return tuple(sorted(prints))
