"""A path a model config names, kept inside the folder it belongs to.

Every file a config names (the model file, labels, warm-up data, plugin
libraries, engine caches) comes from ``config.pbtxt`` or from a client's load
override, and both are hostile input: a name must not lead the daemon to read,
run or write a file outside the model's folder. One rule, checked twice:

* ``path_problem`` is lexical (no filesystem access) and runs when a config is
  parsed, so an override naming ``/etc/passwd`` is refused before anything is
  opened, with the config's line and column when it comes from a file;
* ``resolve_inside`` runs where the file is opened and follows symlinks, so a
  link inside the model folder cannot lead out of it either.

The folder is the model's own (``<repository>/<model>``; warm-up data has the
stricter ``<model>/warmup``). A model folder that is itself a symlink is fine:
containment is measured from where it really is. Messages show only the name
the config gave, never where a path outside leads.

``read_regular_file`` is the one way a named file is read: regular files only
(a FIFO, a device such as ``/dev/zero`` or a directory is refused without
blocking), and never more than the caller's byte limit, checked before reading.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from edgebox.errors import InvalidArgument, Unavailable

MODEL_FOLDER = "the model folder"
WARMUP_FOLDER_LABEL = "the model's warmup folder"


def path_problem(field: str, name: str, folder: str = MODEL_FOLDER, start: str = "") -> str | None:
    """Why ``name`` cannot name a file inside ``folder``, or None when it can.

    ``start`` is where ``name`` is taken from, relative to the folder (``"1"``
    for a model file, which lives in a version folder); ``..`` may climb back
    up to the folder but not past it.
    """
    if "\0" in name:
        return f"{field} {_shown(name)} contains a NUL character"
    if name.startswith(("/", "\\")) or os.path.isabs(name):
        return f"{field} {_shown(name)} is outside {folder}"
    joined = posixpath.normpath(posixpath.join(start, name))
    if joined == ".":
        return f"{field} {_shown(name)} names {folder} itself, not a file in it"
    if joined == ".." or joined.startswith("../"):
        return f"{field} {_shown(name)} is outside {folder}"
    return None


def resolve_inside(
    folder: Path,
    name: str,
    field: str,
    where: str,
    start: str = "",
    folder_label: str = MODEL_FOLDER,
) -> Path:
    """``folder / start / name``, once it is known to stay inside ``folder``
    after symlinks are followed; raises InvalidArgument (``<where>: <field>
    '<name>' is outside the model folder``) otherwise. The returned path is the
    lexical one, so messages keep naming the file as the config does."""
    problem = path_problem(field, name, folder_label, start)
    if problem is not None:
        raise InvalidArgument(f"{where}: {problem}")
    path = Path(folder, start, name) if start else Path(folder, name)
    real_folder = os.path.realpath(folder)
    real_path = os.path.realpath(path)
    if real_path == real_folder or os.path.commonpath([real_folder, real_path]) != real_folder:
        raise InvalidArgument(
            f"{where}: {field} {_shown(name)} is outside {folder_label} (a symlink leads out)"
        )
    return path


def model_file_inside(model_dir: Path, version_dir: Path, filename: str, where: str) -> Path:
    """A version's model file (``default_model_filename``, taken from its
    version folder), kept inside the model folder. Raises InvalidArgument when
    it leads out, Unavailable when it is missing. Every backend finds its
    model file here, so an absolute ``default_model_filename`` never reaches
    ``import`` or a runtime."""
    path = resolve_inside(
        model_dir, filename, "default_model_filename", where, start=version_dir.name
    )
    if not path.exists():
        raise Unavailable(f"{where}: model file '{path}' not found")
    return path


class FileTooLarge(ValueError):
    """A named file is larger than its reader allows; nothing was read."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"holds {size} bytes, more than the {max_bytes} allowed")
        self.size = size
        self.max_bytes = max_bytes


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The whole of ``path``, which must be a regular file of at most
    ``max_bytes``. Raises ValueError ("is not a regular file") for a FIFO,
    device or directory, FileTooLarge when the open file's size is over the
    limit (checked before a byte is read), OSError when it cannot be opened.
    The open does not block on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("is not a regular file")
        if info.st_size > max_bytes:
            raise FileTooLarge(info.st_size, max_bytes)
        chunks = []
        left = info.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _shown(name: str) -> str:
    return "'" + name.replace("\0", "\\0") + "'"
