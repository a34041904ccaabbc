"""Unpack a downloaded artifact into a new folder, trusting nothing in it.

The sha256 only proves the archive is the one the document named; the
document's signer may still have packed something hostile by mistake, or on
purpose with a stolen key. So every member is checked here by our own rules,
not by ``tarfile``'s extraction filters (absent from Python 3.10, and with
behaviour that changed between patch releases): a member is a regular file or
a folder with a plain relative name, nothing else. Links, devices, fifos,
absolute or ``..`` names, control characters, setuid/setgid/sticky bits, too
many members or too many bytes are refused, naming the member and the reason.

Files are written by this code (never by ``tarfile.extract``) with fixed
modes: 0644, or 0755 when the archive marked them executable; folders 0755.
The decompressed stream is capped as well as the members' sizes, so a small
gzip that inflates to gigabytes of headers stops at the cap too.

Everything is written into a hidden sibling of ``into`` and renamed to it only
once complete, so nobody ever sees a half-unpacked folder; on any refusal the
sibling is removed.
"""

from __future__ import annotations

import gzip
import io
import os
import secrets
import shutil
import stat
import tarfile
import zlib
from pathlib import Path

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.fleet.artifact_errors import ArtifactRejected

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_MAX_MEMBERS = 10_000
_HEADER_ALLOWANCE = 16 * 1024
"""Decompressed bytes allowed per member on top of its contents: a header, a
PAX record with a path up to PATH_MAX, and padding fit in it with room to spare."""
_TRAILER_ALLOWANCE = 1024 * 1024
_CHUNK = 1 << 20
_FORBIDDEN_BITS = ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))


def unpack(
    archive: Path,
    into: Path,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> None:
    """Create ``into`` (which must not exist) holding the archive's files;
    raises ArtifactRejected, leaving nothing behind, on the first member that
    breaks a rule or when the archive is not a readable tar.gz."""
    archive = Path(archive)
    into = Path(into)
    where = f"artifact '{archive.name}'"
    if os.path.lexists(into):
        raise EdgeboxError(
            f"{where}: cannot unpack into '{into}': it exists already", ErrorCode.ALREADY_EXISTS
        )
    staging = into.with_name(f".{into.name}.{secrets.token_hex(4)}.unpacking")
    try:
        staging.mkdir(mode=0o700)
    except OSError as err:
        raise EdgeboxError(f"{where}: cannot unpack into '{into}': {err}") from err
    try:
        with open(archive, "rb") as raw:
            zipped = gzip.GzipFile(fileobj=raw, mode="rb")
            limit = max_bytes + max_members * _HEADER_ALLOWANCE + _TRAILER_ALLOWANCE
            capped = _CappedReader(zipped, limit, where)
            _extract(capped, staging, where, max_bytes, max_members)
        os.chmod(staging, 0o755)
        os.rename(staging, into)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise ArtifactRejected(f"{where}: not a readable tar.gz: {err}") from err
    except OSError as err:
        raise EdgeboxError(f"{where}: cannot unpack into '{into}': {err}") from err
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def _extract(stream: io.RawIOBase, root: Path, where: str, max_bytes: int, max_members: int):
    total = 0
    members = 0
    files = 0
    # Stream mode reads the archive once, front to back: nothing is held in
    # memory and no member is looked at twice.
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            members += 1
            if members > max_members:
                raise ArtifactRejected(
                    f"{where}: member '{_shown(member.name)}': more than {max_members} members"
                )
            parts = _checked_parts(member, where)
            if not parts:
                continue
            target = root.joinpath(*parts)
            if member.isdir():
                _make_folder(target, root, where, member.name)
                continue
            total += member.size
            if total > max_bytes:
                raise ArtifactRejected(
                    f"{where}: member '{_shown(member.name)}': brings the unpacked size to "
                    f"{total} bytes, over the cap of {max_bytes} bytes"
                )
            _make_folder(target.parent, root, where, member.name)
            _write_file(tar, member, target, where)
            files += 1
    if files == 0:
        raise ArtifactRejected(f"{where}: holds no files")


def _checked_parts(member: tarfile.TarInfo, where: str) -> list[str]:
    name = member.name
    shown = _shown(name)

    def refuse(reason: str) -> ArtifactRejected:
        return ArtifactRejected(f"{where}: member '{shown}': {reason}")

    if member.issym():
        raise refuse(f"is a symlink (to '{_shown(member.linkname)}'); links are not allowed")
    if member.islnk():
        raise refuse(f"is a hard link (to '{_shown(member.linkname)}'); links are not allowed")
    if member.ischr() or member.isblk():
        raise refuse("is a device; only regular files and folders are allowed")
    if member.isfifo():
        raise refuse("is a fifo; only regular files and folders are allowed")
    if member.issparse() or not (member.isreg() or member.isdir()):
        raise refuse("is not a regular file or folder")
    if not name or any(ord(char) < 0x20 or ord(char) == 0x7F for char in name):
        raise refuse("the name is empty or holds control characters")
    if name.startswith("/"):
        raise refuse("absolute paths are not allowed")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise refuse("'..' is not allowed in a path")
    for bit, label in _FORBIDDEN_BITS:
        if member.mode & bit:
            raise refuse(f"has the {label} bit; not allowed")
    if not parts and not member.isdir():
        raise refuse("names no path")
    return parts


def _make_folder(target: Path, root: Path, where: str, name: str) -> None:
    missing = []
    folder = target
    while folder != root and not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    if folder != root and not folder.is_dir():
        raise ArtifactRejected(
            f"{where}: member '{_shown(name)}': '{folder.relative_to(root)}' is a file already"
        )
    for path in reversed(missing):
        path.mkdir(mode=0o755)
        os.chmod(path, 0o755)


def _write_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, where: str) -> None:
    mode = 0o755 if member.mode & 0o111 else 0o644
    try:
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        raise ArtifactRejected(
            f"{where}: member '{_shown(member.name)}': appears twice in the archive"
        ) from None
    source = tar.extractfile(member)
    assert source is not None  # a regular member always has contents
    with os.fdopen(descriptor, "wb") as written:
        while chunk := source.read(_CHUNK):
            written.write(chunk)
        os.fchmod(written.fileno(), mode)


def _shown(name: str) -> str:
    """The name as it may appear in a log line: control characters escaped."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in name):
        return name.encode("unicode_escape").decode("ascii")
    return name


class _CappedReader(io.RawIOBase):
    """Raises once more than ``limit`` decompressed bytes have been read."""

    def __init__(self, source: gzip.GzipFile, limit: int, where: str) -> None:
        self._source = source
        self._left = limit
        self._limit = limit
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._source.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise ArtifactRejected(
                f"{self._where}: decompresses to more than {self._limit} bytes; "
                "refused before reading on"
            )
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)
