"""The ``sha256`` and ``size`` a document gives for an artifact: from the
local file the operator uploaded, or from the artifact's URL itself, read
once and hashed as it streams, never kept and never more than a cap."""

from __future__ import annotations

import hashlib
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from edgebox.errors import EdgeboxError

CHUNK_BYTES = 1 << 20
DOWNLOAD_TIMEOUT_S = 30.0


def file_digest(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    try:
        with path.open("rb") as file:
            while chunk := file.read(CHUNK_BYTES):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise EdgeboxError(f"artifact file '{path}': {exc.strerror or exc}") from None
    if size == 0:
        raise EdgeboxError(f"artifact file '{path}' is empty")
    return digest.hexdigest(), size


def url_digest(url: str, max_bytes: int, ca_file: Path | None = None) -> tuple[str, int]:
    """What a device will download from ``url``, hashed; EdgeboxError past
    ``max_bytes`` or on any HTTP or network error."""
    if not url.startswith(("http://", "https://")):
        raise EdgeboxError(f"artifact '{url}': only http:// and https:// URLs are fetched")
    context = ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S, context=context) as answer:
            while chunk := answer.read(CHUNK_BYTES):
                size += len(chunk)
                if size > max_bytes:
                    raise EdgeboxError(
                        f"artifact '{url}': larger than {max_bytes} bytes (raise "
                        "--artifact-max-mb, or give --artifact-file)"
                    )
                digest.update(chunk)
    except urllib.error.HTTPError as exc:
        raise EdgeboxError(f"artifact '{url}': HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EdgeboxError(f"artifact '{url}': {reason}") from None
    if size == 0:
        raise EdgeboxError(f"artifact '{url}' is empty")
    return digest.hexdigest(), size
