"""What ``edgebox build-engine`` records about an engine beyond the keys
themselves (``backends/tensorrt/compatibility.py`` declares them, for the
TensorRT backend that reads them back at load): the ONNX file's hash and the
build's time.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def utc_timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
