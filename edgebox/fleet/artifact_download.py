"""Fetch an artifact a signed document names, over links that drop.

Devices sit behind NAT, on cellular links and flaky site networks, so a
download that breaks keeps what it fetched: bytes go to
``<download_dir>/<sha256>.part`` and the next try asks for the rest with
``Range: bytes=N-`` (a server answering 206 is appended to, one answering 200
starts the file again). Only the verified file is renamed to
``<sha256>.tar.gz``, so that name always means "checked", and a later call for
the same artifact reuses it without touching the network.

Nothing a server says is trusted beyond the document: a declared size over
``max_bytes`` is refused before connecting, a Content-Length larger than the
declared size is refused before reading, and no byte past the declared size
is ever written. The sha256 decides at the end; a mismatch deletes the part
so the next try starts clean. Redirects are followed only within the same
scheme (an https URL never falls back to http), at most ``MAX_REDIRECTS``.

One caller per ``download_dir`` at a time (the agent's reconcile thread); two
concurrent downloads of the same artifact would share a part file.
"""

from __future__ import annotations

import http.client
import os
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urljoin, urlsplit

from edgebox import __version__
from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.fleet.artifact_errors import ArtifactRejected, ArtifactUnavailable
from edgebox.fleet.digest import file_sha256

TIMEOUT_S = 30.0
"""Connect and per-read timeout: a stalled server fails the try, it never hangs the agent."""
DEADLINE_S = 3600.0
MAX_REDIRECTS = 5
_CHUNK = 64 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class ArtifactRef(Protocol):
    """What a document says about an artifact (``edgebox.fleet.document.Artifact``)."""

    url: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Downloaded:
    """The verified file, and what this call moved over the network (for metrics)."""

    path: Path
    fetched_bytes: int
    resumed_from: int
    reused: bool


def download(
    artifact: ArtifactRef,
    download_dir: Path,
    max_bytes: int,
    ca_file: Path | None,
    progress: Callable[[str], None] | None = None,
    timeout_s: float = TIMEOUT_S,
    deadline_s: float = DEADLINE_S,
) -> Downloaded:
    """Return ``<download_dir>/<sha256>.tar.gz``, verified. ``progress`` is told
    ``"downloading"`` before any byte is fetched and ``"verifying"`` before the
    sha256 is checked (the agent's reported states). Raises ArtifactRejected
    when the artifact is at fault, ArtifactUnavailable when the network or the
    server is (the part is kept for the next try)."""
    url, sha256, size = _checked(artifact, max_bytes)
    download_dir = Path(download_dir)
    _make_private_folder(download_dir)
    final = download_dir / f"{sha256}.tar.gz"
    part = download_dir / f"{sha256}.part"
    if final.is_file() and not final.is_symlink():
        if file_sha256(final) == (sha256, size):
            return Downloaded(final, 0, 0, True)
        final.unlink()
    if part.is_symlink() or (part.exists() and not part.is_file()):
        raise ArtifactRejected(f"download folder '{download_dir}': '{part.name}' is not a file")
    have = part.stat().st_size if part.exists() else 0
    if have > size:
        part.unlink()
        have = 0
    fetched = 0
    resumed_from = have
    if progress is not None:
        progress("downloading")
    if have < size:
        context = _tls_context(ca_file) if url.startswith("https:") else None
        fetched, resumed_from = _fetch(
            url, part, have, size, context, timeout_s, time.monotonic() + deadline_s
        )
    if progress is not None:
        progress("verifying")
    got, got_size = file_sha256(part)
    if got != sha256 or got_size != size:
        part.unlink(missing_ok=True)
        raise ArtifactRejected(
            f"artifact '{url}': sha256 mismatch: expected {sha256}, got {got}"
            + ("" if got_size == size else f" ({got_size} bytes, expected {size})")
        )
    os.replace(part, final)
    _sync_folder(download_dir)
    return Downloaded(final, fetched, resumed_from, False)


def _checked(artifact: ArtifactRef, max_bytes: int) -> tuple[str, str, int]:
    url, sha256, size = artifact.url, artifact.sha256, artifact.size
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ArtifactRejected(f"artifact '{url}': expected an http:// or https:// URL")
    # The digest becomes a file name: anything but 64 hex digits could leave the folder.
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ArtifactRejected(f"artifact '{url}': sha256 '{sha256}' is not 64 lowercase hex")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ArtifactRejected(f"artifact '{url}': size {size!r} is not a positive integer")
    if size > max_bytes:
        raise ArtifactRejected(
            f"artifact '{url}': declared size {size} bytes is over the cap of {max_bytes} bytes"
        )
    return url, sha256, size


def _make_private_folder(folder: Path) -> None:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise EdgeboxError(f"download folder '{folder}': cannot create it: {err}") from err
    if not folder.is_dir():
        raise EdgeboxError(f"download folder '{folder}': not a folder")


def _tls_context(ca_file: Path | None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as err:
        raise InvalidArgument(f"ca_file '{ca_file}': cannot load it: {err}") from err


def _fetch(
    url: str,
    part: Path,
    have: int,
    size: int,
    context: ssl.SSLContext | None,
    timeout_s: float,
    deadline: float,
) -> tuple[int, int]:
    """Append to ``part`` until it holds ``size`` bytes; (bytes fetched, resumed from)."""
    original = url
    for _ in range(MAX_REDIRECTS + 1):
        connection = _connect(url, context, timeout_s)
        try:
            response = _request(connection, url, have)
            if response.status in (301, 302, 303, 307, 308):
                url = _redirect(original, url, response.getheader("Location"))
                continue
            if response.status == 200:
                have = 0
            elif response.status == 206:
                _check_range(original, response.getheader("Content-Range"), have, size)
            elif response.status == 416:
                part.unlink(missing_ok=True)
                raise ArtifactUnavailable(
                    f"artifact '{original}': the server refused the range from byte {have} "
                    "(HTTP 416); the next try starts again"
                )
            else:
                raise ArtifactUnavailable(
                    f"artifact '{original}': HTTP {response.status} {response.reason}"
                )
            return _receive(original, response, part, have, size, deadline), have
        except (OSError, http.client.HTTPException) as err:
            kept = part.stat().st_size if part.exists() else 0
            raise ArtifactUnavailable(
                f"artifact '{original}': {err or type(err).__name__}; "
                f"{kept} of {size} bytes kept for the next try"
            ) from err
        finally:
            connection.close()
    raise ArtifactUnavailable(f"artifact '{original}': more than {MAX_REDIRECTS} redirects")


def _connect(
    url: str, context: ssl.SSLContext | None, timeout_s: float
) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=context
        )
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)


def _request(
    connection: http.client.HTTPConnection, url: str, have: int
) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"User-Agent": f"edgebox/{__version__}", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    connection.request("GET", target, headers=headers)
    return connection.getresponse()


def _redirect(original: str, url: str, location: str | None) -> str:
    if not location:
        raise ArtifactUnavailable(f"artifact '{original}': a redirect without a Location")
    target = urljoin(url, location)
    if urlsplit(target).scheme != urlsplit(url).scheme:
        raise ArtifactRejected(
            f"artifact '{original}': redirected to '{target}', another scheme; refused"
        )
    return target


def _check_range(url: str, header: str | None, have: int, size: int) -> None:
    match = _CONTENT_RANGE.fullmatch((header or "").strip())
    if match is None or int(match.group(1)) != have:
        raise ArtifactUnavailable(
            f"artifact '{url}': asked for bytes from {have}, got Content-Range '{header}'"
        )
    if match.group(3) != "*" and int(match.group(3)) != size:
        raise ArtifactRejected(
            f"artifact '{url}': the server's file has {match.group(3)} bytes, "
            f"the document declares {size}"
        )


def _receive(
    url: str, response: http.client.HTTPResponse, part: Path, have: int, size: int, deadline: float
) -> int:
    wanted = size - have
    declared = response.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > wanted:
        raise ArtifactRejected(
            f"artifact '{url}': Content-Length {declared} is more than the {wanted} bytes "
            f"expected (declared size {size}, {have} already here)"
        )
    received = 0
    with open(part, "r+b" if have else "wb") as written:
        written.truncate(have)
        written.seek(have)
        while received < wanted:
            if time.monotonic() > deadline:
                raise ArtifactUnavailable(
                    f"artifact '{url}': past the download deadline; "
                    f"{have + received} of {size} bytes kept for the next try"
                )
            chunk = response.read(min(_CHUNK, wanted - received))
            if not chunk:
                break
            written.write(chunk)
            received += len(chunk)
        written.flush()
        os.fsync(written.fileno())
    if received < wanted:
        raise ArtifactUnavailable(
            f"artifact '{url}': the response ended after {have + received} of {size} bytes; "
            "the next try resumes"
        )
    if response.read(1):
        part.unlink()
        raise ArtifactRejected(
            f"artifact '{url}': the server sent more than the declared {size} bytes"
        )
    return received


def _sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
