"""``engine_build.json``: what an engine was built with, next to ``model.plan``.

A serialized engine only runs under the TensorRT version and on the GPU (and
DLA setup) it was built for; loading it elsewhere fails deep inside TensorRT
("Version tag does not match", NVIDIA/TensorRT#2105). The TensorRT backend
reads this file at load to refuse such an engine with a reason naming both
sides. The keys are agreed with that backend; change them only together.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

SIDECAR_FILENAME = "engine_build.json"

PRECISIONS = ("fp32", "fp16", "int8")


@dataclass(frozen=True)
class EngineBuildRecord:
    tensorrt_version: str
    """``tensorrt.__version__`` at build time, e.g. "8.6.2.3"."""
    device_name: str
    """The CUDA device name as pycuda reports it, e.g. "Orin"."""
    compute_capability: str
    """"major.minor", e.g. "8.7" for Orin."""
    dla_core: int | None
    """The DLA core the engine was built for; None for a GPU-only engine."""
    gpu_fallback: bool
    precision: str
    """"fp32", "fp16" or "int8": the lowest precision the build allowed."""
    onnx_sha256: str
    built_at: str
    """ISO 8601 in UTC, e.g. "2025-05-01T09:30:00Z"."""
    edgebox_version: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> EngineBuildRecord:
        """ValueError (json.JSONDecodeError is one) names what is missing or wrong."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in data]
        if missing:
            raise ValueError(f"missing keys: {', '.join(missing)}")
        record = cls(**{name: data[name] for name in names})
        if record.precision not in PRECISIONS:
            raise ValueError(f"precision '{record.precision}' is not one of {PRECISIONS}")
        return record


def read_record(version_dir: Path) -> EngineBuildRecord | None:
    """The record in a version folder, or None when it is absent or unreadable
    (an engine published by hand, or by an older edgebox)."""
    try:
        return EngineBuildRecord.from_json((version_dir / SIDECAR_FILENAME).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def utc_timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
