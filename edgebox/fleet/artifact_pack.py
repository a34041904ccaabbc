"""``edgebox fleet pack``: one model version folder as a reproducible tar.gz.

The same folder always gives the same bytes, hence the same sha256, whoever
packs it and whenever: members are sorted, and every time stamp, owner and
mode that the copy on the operator's disk happened to get is replaced by a
fixed value (mtime 0, uid/gid 0, no owner names, 0644 or 0755). An operator
can therefore re-pack a version and see that the published sha256 still
matches, and a device can never tell two packs of one folder apart.

Only regular files and folders go in. A symlink could point anywhere on the
operator's machine (and devices refuse links anyway, ``artifact_unpack``), so
it is refused here with its path rather than silently followed or dropped.
``__pycache__`` folders and ``.pyc`` files are left out: they are rebuilt on the
device and differ between Python versions.
"""

from __future__ import annotations

import gzip
import io
import os
import secrets
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from edgebox.errors import InvalidArgument
from edgebox.fleet.digest import file_sha256

SKIPPED_FOLDERS = ("__pycache__",)
SKIPPED_SUFFIXES = (".pyc",)


@dataclass(frozen=True)
class Packed:
    """The artifact as a desired-state document declares it (with a url added)."""

    path: Path
    sha256: str
    size: int


def pack(version_dir: Path, out: Path) -> Packed:
    """Write ``out`` (replaced atomically if it exists) from ``version_dir``'s
    contents, paths relative to the folder; raises InvalidArgument naming the
    first entry that cannot go into an artifact."""
    version_dir = Path(version_dir)
    out = Path(out)
    if not version_dir.is_dir() or version_dir.is_symlink():
        raise InvalidArgument(f"version folder '{version_dir}': not a folder")
    entries = list(_entries(version_dir, version_dir, ""))
    if not any(not is_dir for _, _, is_dir in entries):
        raise InvalidArgument(f"version folder '{version_dir}': holds no files to pack")
    resolved_out = out.resolve()
    if resolved_out.is_relative_to(version_dir.resolve()):
        raise InvalidArgument(
            f"output '{out}': inside the version folder '{version_dir}'; write it elsewhere"
        )
    staging = out.with_name(f".{out.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(staging, "xb") as raw:
            _write_archive(raw, entries)
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(staging, 0o644)
        digest, size = file_sha256(staging)
        os.replace(staging, out)
    except OSError as err:
        raise InvalidArgument(f"output '{out}': cannot write it: {err}") from err
    finally:
        staging.unlink(missing_ok=True)
    return Packed(out, digest, size)


def _entries(root: Path, folder: Path, prefix: str):
    """(path on disk, name in the archive, is a folder), depth first, sorted by name."""
    with os.scandir(folder) as scan:
        children = sorted(scan, key=lambda entry: entry.name)
    for entry in children:
        name = f"{prefix}{entry.name}"
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            if entry.name in SKIPPED_FOLDERS:
                continue
            yield Path(entry.path), name, True
            yield from _entries(root, Path(entry.path), f"{name}/")
        elif stat.S_ISREG(mode):
            if entry.name.endswith(SKIPPED_SUFFIXES):
                continue
            yield Path(entry.path), name, False
        else:
            raise InvalidArgument(
                f"version folder '{root}': '{name}' is {_kind(mode)}; "
                "an artifact holds regular files and folders only"
            )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a fifo"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _write_archive(raw: io.BufferedWriter, entries: list[tuple[Path, str, bool]]) -> None:
    # GzipFile would otherwise record the output's name and the current time.
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path, name, is_dir in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if is_dir:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            with open(path, "rb") as source:
                status = os.fstat(source.fileno())
                info.size = status.st_size
                info.mode = 0o755 if status.st_mode & 0o111 else 0o644
                tar.addfile(info, source)
