"""Artifacts: one model version folder as a tar.gz that a device can fetch and trust.

An operator packs a version folder (``pack``) and puts the file on any HTTP(S)
server or S3-compatible store; the signed desired-state document names its
``url``, ``sha256`` and ``size``. A device fetches it (``download``: resumable,
size-capped, sha256-checked), unpacks it into a fresh folder by its own rules
(``unpack``), and hands that folder to ``edgebox.repository.publish``. Nothing
in an artifact is ever run by this code.

This module is the one import point; each step lives in its own module.
"""

from __future__ import annotations

from edgebox.fleet.artifact_download import ArtifactRef, Downloaded, download
from edgebox.fleet.artifact_errors import ArtifactRejected, ArtifactUnavailable
from edgebox.fleet.artifact_pack import Packed, pack
from edgebox.fleet.artifact_unpack import DEFAULT_MAX_BYTES, DEFAULT_MAX_MEMBERS, unpack

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_MEMBERS",
    "ArtifactRef",
    "ArtifactRejected",
    "ArtifactUnavailable",
    "Downloaded",
    "Packed",
    "download",
    "pack",
    "unpack",
]
