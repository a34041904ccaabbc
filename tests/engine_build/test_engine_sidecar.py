"""``engine_build.json``: the agreed keys, exactly, in a form the TensorRT
backend reads back (``backends/tensorrt/compatibility.py``)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from edgebox.backends.tensorrt.compatibility import (
    SIDECAR_FILENAME,
    EngineBuildRecord,
    read_build_info,
    read_record,
)
from edgebox.engine_build.sidecar import file_sha256, utc_timestamp

AGREED_KEYS = {
    "tensorrt_version",
    "device_name",
    "compute_capability",
    "dla_core",
    "gpu_fallback",
    "precision",
    "onnx_sha256",
    "built_at",
    "edgebox_version",
}

RECORD = EngineBuildRecord(
    tensorrt_version="8.6.2.3",
    device_name="Orin",
    compute_capability="8.7",
    dla_core=0,
    gpu_fallback=True,
    precision="fp16",
    onnx_sha256="ab" * 32,
    built_at="2025-05-01T09:30:00Z",
    edgebox_version="0.1.0",
)


def test_the_record_holds_exactly_the_agreed_keys() -> None:
    data = json.loads(RECORD.to_json())
    assert set(data) == AGREED_KEYS
    assert data["dla_core"] == 0
    assert data["gpu_fallback"] is True
    assert RECORD.to_json().endswith("}\n")


def test_a_gpu_engine_records_a_null_dla_core() -> None:
    record = EngineBuildRecord(**{**RECORD.__dict__, "dla_core": None, "gpu_fallback": False})
    assert json.loads(record.to_json())["dla_core"] is None


def test_the_record_reads_back_through_the_tensorrt_backend(tmp_path: Path) -> None:
    (tmp_path / SIDECAR_FILENAME).write_text(RECORD.to_json())

    info = read_build_info(tmp_path)

    assert info is not None
    assert (info.tensorrt_version, info.device_name, info.compute_capability) == (
        "8.6.2.3",
        "Orin",
        "8.7",
    )
    assert (info.dla_core, info.gpu_fallback, info.precision) == (0, True, "fp16")
    assert read_record(tmp_path) == RECORD


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        json.dumps({"tensorrt_version": "8.6"}),
        RECORD.to_json().replace("fp16", "fp8"),
    ],
    ids=["not json", "not an object", "missing keys", "unknown precision"],
)
def test_an_unreadable_record_counts_as_none(tmp_path: Path, content: str) -> None:
    (tmp_path / SIDECAR_FILENAME).write_text(content)
    assert read_record(tmp_path) is None


def test_a_missing_record_is_none(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None


def test_timestamps_are_utc_iso_8601() -> None:
    summer_in_berlin = datetime(2025, 5, 1, 11, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    assert utc_timestamp(summer_in_berlin) == "2025-05-01T09:30:05Z"


def test_the_onnx_hash_is_the_files_sha256(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07" * 1_000_000)
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
