"""Where the model files of load requests are written: a private folder of
the daemon's (``<state_directory>/override-models``, mode 0700), never the
model repository, so a client can neither overwrite a repository file nor
leave one behind.

Each load writes a fresh folder, ``.incoming-<token>/<model>/``, and renames
``.incoming-<token>`` to ``<token>`` only once every file is written: the
manager loads ``<token>/<model>`` and never sees half a folder. A folder
stays while a served version (or the model's record of where it loads from)
uses it; ``sweep`` removes the others after every load and unload. Nothing
here outlives the process: in explicit mode a model loads again only when
asked, so what a previous run left is removed at start.

The bytes held at once (the folders kept plus those being written) are
capped by ``max_bytes`` (the ``load_files_max_bytes`` setting); a load's own
files count whole, while the copy it would replace does not, so replacing a
model's files needs room for one copy, and briefly holds both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from edgebox.errors import InvalidArgument, Unavailable, Unsupported
from edgebox.repository.override_files import OverrideFile

log = logging.getLogger(__name__)

INCOMING = ".incoming-"
OVERRIDE_FOLDER_NAME = "override-models"
"""The folder's name inside the state directory."""


class OverrideFilesTooLarge(InvalidArgument):
    """A load request's files alone are more than the cap allows."""


class OverrideFolderError(Unavailable):
    """The server could not write a load request's files (disk full, the
    folder unusable, no room under the cap): not the request's mistake."""


class OverrideFolders:
    """Thread-safe: loads of different models write side by side; the lock
    covers the bookkeeping and ``sweep``, never the writing of files."""

    def __init__(self, root: Path | None, max_bytes: int) -> None:
        """``root`` None, or ``max_bytes`` 0: loads with files are refused.
        What a previous run left in ``root`` is removed now."""
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._sizes: dict[Path, tuple[str, int]] = {}
        """Each folder written, ``<root>/<token>``, -> (model, bytes)."""
        self._writing: set[Path] = set()
        if root is not None and root.exists():
            self._remove_leftovers(root)

    @contextlib.contextmanager
    def write(self, model: str, files: list[OverrideFile], replaces: set[Path]) -> Iterator[Path]:
        """A complete folder holding ``files``: yields the model folder
        (``<root>/<token>/<model>``) to load from. While the ``with`` runs no
        ``sweep`` removes it; afterwards it stays only if something uses it.
        ``replaces``: the model folders this load would free (the model's
        current override), not counted against the cap."""
        if self.root is None or self.max_bytes <= 0:
            raise Unsupported(
                f"failed to load '{model}': model files in a load request are turned off on "
                "this server (load_files_max_bytes is 0)"
            )
        total = sum(len(f.data) for f in files)
        if total > self.max_bytes:
            raise OverrideFilesTooLarge(
                f"the files total {total} bytes, more than load_files_max_bytes "
                f"({self.max_bytes}) allows"
            )
        token = secrets.token_hex(8)
        folder = self.root / token
        with self._lock:
            freed = {p.parent for p in replaces}
            held = sum(size for path, (_, size) in self._sizes.items() if path not in freed)
            if held + total > self.max_bytes:
                raise OverrideFolderError(
                    f"failed to load '{model}': its files ({total} bytes) do not fit beside the "
                    f"{held} bytes of other models' files held (load_files_max_bytes "
                    f"{self.max_bytes}); unload a model loaded from files first"
                )
            self._sizes[folder] = (model, total)
            self._writing.add(folder)
        try:
            self._write(folder, model, files)
            yield folder / model
        finally:
            with self._lock:
                self._writing.discard(folder)

    def sweep(self, in_use: Callable[[], set[Path]]) -> None:
        """Remove every folder nothing uses: ``in_use()`` gives the model
        folders served versions and model records point at. Called after a
        load or unload; a folder still being written is left alone."""
        with self._lock:
            if not self._sizes:
                return
            used = {path.parent for path in in_use()}
            for folder in list(self._sizes):
                if folder in self._writing or folder in used:
                    continue
                shutil.rmtree(folder, ignore_errors=True)
                del self._sizes[folder]

    def held_bytes(self) -> int:
        with self._lock:
            return sum(size for _, size in self._sizes.values())

    def _write(self, folder: Path, model: str, files: list[OverrideFile]) -> None:
        incoming = self.root / f"{INCOMING}{folder.name}"
        try:
            self._own_root()
            os.mkdir(incoming, 0o700)
            model_dir = incoming / model
            os.mkdir(model_dir, 0o700)
            for file in files:
                target = model_dir / file.path
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(file.data)
            os.rename(incoming, folder)
        except OSError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            with self._lock:
                self._sizes.pop(folder, None)
            log.error("cannot write the files for a load of %r in %s: %s", model, self.root, exc)
            raise OverrideFolderError(
                f"failed to load '{model}': the server could not write its files: "
                f"{exc.strerror or exc}"
            ) from None

    def _own_root(self) -> None:
        """Create the root, or make sure the one there is ours: a folder (not
        a link) owned by this user, closed to everyone else."""
        assert self.root is not None
        try:
            os.mkdir(self.root, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(self.root)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise OSError(f"'{self.root}' is not a folder owned by this user")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(self.root, 0o700)

    def _remove_leftovers(self, root: Path) -> None:
        try:
            info = os.lstat(root)
            if not stat.S_ISDIR(info.st_mode):
                log.error("'%s' is not a folder; loads with model files will fail", root)
                return
            for entry in os.scandir(root):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        except OSError as exc:
            log.warning("cannot clear the model files left in %s: %s", root, exc)
