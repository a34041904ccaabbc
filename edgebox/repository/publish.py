"""``edgebox publish``: put a model version into a repository that a poll-mode
daemon may be watching, without it ever seeing a half copy.

The settle check (``settle.py``) only guesses that a copy has finished: it waits
for the files to stop changing, and a copy that stalls for longer than a poll
interval looks finished. An atomic rename is the only way a poller can never
see a half copy, so everything is first copied into a hidden staging folder in
the model folder (the scanner ignores hidden names, ``names.is_ignored``, and
the same filesystem makes ``os.rename`` atomic), flushed to disk, and only then
renamed to its version number. After a power cut the version is either absent or
complete, never truncated.

A model that is not in the repository yet is built whole in a hidden folder at
the repository's top level and renamed into place the same way, so the daemon
never sees a model folder without its config or its version (each would be
reported UNAVAILABLE for a poll or two).

Versions are never overwritten: a loaded version keeps its files open and
serves from them, and replacing them underneath would swap models without a
reload. Publish a new version number instead.

This module writes to the repository; it is called by the command line, never
by the daemon, and runs nothing from the model.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path

from edgebox.errors import ConfigError, EdgeboxError, ErrorCode, InvalidArgument, NotFound
from edgebox.repository.config import CONFIG_FILENAME, parse_model_config_file
from edgebox.repository.layout import scan_model
from edgebox.repository.names import check_new_model_name, version_number

SKIPPED_NAMES = ("__pycache__",)
"""Left out of a directory source: Python writes it when model.py is imported,
and it is rebuilt on the target."""


class ConfigRejected(InvalidArgument):
    """The ``--config`` file has problems; ``problems`` holds each one as
    ``path:line:col: message`` so the caller can list them all, as ``edgebox
    check`` does."""

    def __init__(self, message: str, problems: list[ConfigError]) -> None:
        super().__init__(message)
        self.problems = problems


def publish_version(
    source: Path,
    repository: Path,
    model: str,
    version: int | str | None = None,
    config: Path | None = None,
) -> Path:
    """Copy ``source`` (a model file, or a folder whose contents become the
    version folder) into ``repository/model/<version>`` and return that path.

    ``version`` None takes the highest version folder + 1. ``config``, when
    given, is checked and then installed as the model's config.pbtxt just before
    the version appears, so the daemon reads the version with that config.

    Everything is checked before anything is written; on any failure the
    staging folder is removed and the repository is as it was (except, on a
    lost race for the version number, an installed ``config``).
    """
    check_new_model_name(model)
    requested = _requested_version(version) if version is not None else None
    if not repository.is_dir():
        problem = NotFound if not repository.exists() else InvalidArgument
        raise problem(f"repository '{repository}' is not a folder")
    if not source.exists():
        raise NotFound(f"source '{source}' does not exist")
    if not (source.is_file() or source.is_dir()):
        raise InvalidArgument(f"source '{source}' is neither a file nor a folder")
    model_dir = repository / model
    if model_dir.exists() and not model_dir.is_dir():
        raise InvalidArgument(f"model '{model}': '{model_dir}' is not a folder")
    if source.is_dir() and _is_within(model_dir, source):
        raise InvalidArgument(
            f"source '{source}' contains the model folder '{model_dir}'; "
            "copy the version from somewhere else"
        )

    config_bytes = _checked_config(config, model) if config is not None else None
    if config_bytes is None and not (model_dir / CONFIG_FILENAME).is_file():
        raise NotFound(
            f"model '{model}' has no {CONFIG_FILENAME} in {repository}; pass --config FILE"
        )

    number = requested if requested is not None else _next_version(model_dir)
    target = model_dir / str(number)
    _refuse_existing(model, number, target)

    try:
        if model_dir.is_dir():
            _publish_into_model(source, model_dir, model, number, config_bytes)
        else:
            assert config_bytes is not None
            _publish_new_model(source, repository, model, number, config_bytes)
    except OSError as exc:
        raise EdgeboxError(f"model '{model}' version {number}: {exc}") from None
    return target


def _requested_version(version: int | str) -> int:
    number = version_number(str(version))
    if number is None:
        raise InvalidArgument(
            f"version '{version}': a version folder is named with a positive integer "
            "without a leading zero"
        )
    return number


def _next_version(model_dir: Path) -> int:
    """Counts only what the daemon counts as a version (layout's rules), so the
    result is the version the daemon will take as the newest."""
    if not model_dir.is_dir():
        return 1
    versions = scan_model(model_dir, fingerprints=False).versions
    return max(versions, default=0) + 1


def _refuse_existing(model: str, number: int, target: Path) -> None:
    if os.path.lexists(target):
        raise EdgeboxError(
            f"model '{model}' version {number}: '{target}' already exists; "
            "versions are never overwritten, publish a new version number",
            ErrorCode.ALREADY_EXISTS,
        )


def _checked_config(config: Path, model: str) -> bytes:
    """The file's bytes, once they parse and check as ``model``'s config.

    The file is read where it is, so problems name the file the user wrote.
    A config that sets neither platform nor backend is resolved from the
    version folders next to it, as it would be in a model folder.
    """
    if not config.is_file():
        raise NotFound(f"config file '{config}' does not exist")
    try:
        _, problems = parse_model_config_file(config, model)
    except ConfigError as exc:
        problems = [exc]
    if problems:
        raise ConfigRejected(
            f"model '{model}': config '{config}' has {len(problems)} problem(s); nothing published",
            problems,
        )
    try:
        return config.read_bytes()
    except OSError as exc:
        raise NotFound(f"config file '{config}': cannot read: {exc}") from None


def _publish_into_model(
    source: Path, model_dir: Path, model: str, number: int, config_bytes: bytes | None
) -> None:
    target = model_dir / str(number)
    staging = model_dir / f".{number}.partial-{secrets.token_hex(4)}"
    # Not tempfile.mkdtemp: its 0700 mode would be kept by the rename and could
    # lock out a daemon running as another user.
    os.mkdir(staging)
    try:
        _copy_source(source, staging, model, number)
        _refuse_existing(model, number, target)
        if config_bytes is not None:
            _install_config(model_dir, config_bytes)
        _mark_complete(staging)
        try:
            os.rename(staging, target)
        except OSError as exc:
            # rename(2) replaces an empty folder silently; anything else means
            # the version appeared after the check above.
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                _refuse_existing(model, number, target)
            raise EdgeboxError(
                f"model '{model}' version {number}: cannot rename '{staging}' to '{target}': {exc}"
            ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(model_dir)


def _publish_new_model(
    source: Path, repository: Path, model: str, number: int, config_bytes: bytes
) -> None:
    model_dir = repository / model
    staging = repository / f".{model}.partial-{secrets.token_hex(4)}"
    os.mkdir(staging)
    try:
        version_dir = staging / str(number)
        os.mkdir(version_dir)
        _copy_source(source, version_dir, model, number)
        _write_synced(staging / CONFIG_FILENAME, config_bytes)
        _fsync_dir(staging)
        appeared = EdgeboxError(
            f"model '{model}': '{model_dir}' appeared while publishing; "
            "nothing published, run publish again",
            ErrorCode.ALREADY_EXISTS,
        )
        if os.path.lexists(model_dir):
            raise appeared
        _mark_complete(staging)
        try:
            os.rename(staging, model_dir)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                raise appeared from None
            raise EdgeboxError(
                f"model '{model}': cannot rename '{staging}' to '{model_dir}': {exc}"
            ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(repository)


def _copy_source(source: Path, staging: Path, model: str, number: int) -> None:
    """Fill ``staging`` and flush it: every file, then every folder bottom-up,
    so the rename that follows publishes bytes that are on disk."""
    try:
        if source.is_dir():
            _copy_tree(source, staging, set())
        else:
            _copy_file(source, staging / source.name)
            _fsync_dir(staging)
    except OSError as exc:
        raise EdgeboxError(
            f"model '{model}' version {number}: cannot copy '{source}': {exc}"
        ) from None


def _copy_tree(source: Path, target: Path, ancestors: set[tuple[int, int]]) -> None:
    """Symlinks are followed: the version must hold its own bytes, not point at
    files that may change or vanish after publishing."""
    stat = source.stat()
    key = (stat.st_dev, stat.st_ino)
    if key in ancestors:
        raise InvalidArgument(f"source folder '{source}' links back to a folder above it")
    with os.scandir(source) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        if entry.name in SKIPPED_NAMES:
            continue
        path = Path(entry.path)
        if entry.is_dir():
            os.mkdir(target / entry.name)
            _copy_tree(path, target / entry.name, ancestors | {key})
        elif entry.is_file():
            _copy_file(path, target / entry.name)
        else:
            raise InvalidArgument(f"source '{path}' is neither a file nor a folder")
    _fsync_dir(target)


def _copy_file(source: Path, target: Path) -> None:
    shutil.copy2(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _install_config(model_dir: Path, config_bytes: bytes) -> None:
    """Replace config.pbtxt in one step; an unchanged config is left alone, since
    rewriting it would make the daemon reload the versions it already serves."""
    path = model_dir / CONFIG_FILENAME
    try:
        if path.read_bytes() == config_bytes:
            return
    except OSError:
        pass
    temporary = model_dir / f".{CONFIG_FILENAME}.tmp-{secrets.token_hex(4)}"
    try:
        _write_synced(temporary, config_bytes)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _mark_complete(folder: Path) -> None:
    """Set the folder's mtime a little in the past, so that after the rename
    its ctime is certainly later than its mtime: the mark by which the poller
    takes a renamed folder at first sight (``layout.renamed_in``), which a
    rename within the same clock tick as the last write would otherwise blur."""
    stat = os.stat(folder)
    os.utime(folder, ns=(stat.st_atime_ns, stat.st_mtime_ns - _MARK_NS))


_MARK_NS = 10_000_000


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_within(path: Path, folder: Path) -> bool:
    resolved, ancestor = path.resolve(), folder.resolve()
    return resolved == ancestor or ancestor in resolved.parents
