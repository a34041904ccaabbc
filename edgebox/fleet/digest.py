"""The one way an artifact's sha256 is computed, so packing and verifying agree."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20


def file_sha256(path: Path) -> tuple[str, int]:
    """(hex digest, size in bytes), read in chunks: artifacts run to hundreds of MB."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size
