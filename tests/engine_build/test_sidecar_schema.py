"""``engine_build.json`` has one schema: the record ``edgebox build-engine``
writes and the view the TensorRT backend reads at load hold the same keys, and
the rule for ``dla_core`` is the stricter one on both sides."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from edgebox.backends.tensorrt.compatibility import (
    SIDECAR_FILENAME,
    EngineBuildInfo,
    EngineBuildRecord,
    read_build_info,
    read_record,
)
from edgebox.errors import Unavailable

RECORD = EngineBuildRecord(
    tensorrt_version="8.6.2.3",
    device_name="Orin",
    compute_capability="8.7",
    dla_core=1,
    gpu_fallback=True,
    precision="int8",
    onnx_sha256="cd" * 32,
    built_at="2025-05-01T09:30:00Z",
    edgebox_version="0.1.0",
)


def test_the_load_view_reads_exactly_the_written_keys() -> None:
    written = [f.name for f in fields(EngineBuildRecord)]
    assert [f.name for f in fields(EngineBuildInfo)] == ["path", *written]


def test_every_written_key_is_read_back_unchanged(tmp_path: Path) -> None:
    (tmp_path / SIDECAR_FILENAME).write_text(RECORD.to_json())
    info = read_build_info(tmp_path)
    assert info == EngineBuildInfo(path=tmp_path / SIDECAR_FILENAME, **RECORD.__dict__)


@pytest.mark.parametrize("dla_core", ["0", True, 1.5])
def test_a_dla_core_that_is_not_an_integer_is_refused_by_both_readers(
    tmp_path: Path, dla_core: object
) -> None:
    data = {**RECORD.__dict__, "dla_core": dla_core}
    (tmp_path / SIDECAR_FILENAME).write_text(json.dumps(data))
    assert read_record(tmp_path) is None
    with pytest.raises(Unavailable, match="'dla_core' must be an integer or null"):
        read_build_info(tmp_path)
