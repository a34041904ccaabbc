"""``edgebox build-engine`` with the real TensorRT and pycuda, on a Jetson (or
any CUDA machine with both). Skipped, with the reason, where they are absent.

Builds the demo's lane detector (``scripts/onnx_builders.py``) as a user
would, in a subprocess, and checks the published version: the engine
deserializes under this TensorRT with the ONNX file's I/O, the sidecar names
this TensorRT and this GPU, and config.pbtxt batches as the profile allows.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from installed_modules import installed

from cli_helpers import run_edgebox
from edgebox.repository.config import read_model_config
from scripts.onnx_builders import LANE_ANCHORS, LANE_VALUES, build_lane_model

trt = installed("tensorrt")
cuda = installed("pycuda.driver")
pytestmark = [
    pytest.mark.skipif(
        trt is None, reason="TensorRT is absent: engine builds need JetPack's python3-libnvinfer"
    ),
    pytest.mark.skipif(
        cuda is None, reason="pycuda is absent: engine builds read the GPU through pycuda"
    ),
]

BUILD_TIMEOUT_S = 900
"""An Orin builds the lane model in about a minute; the DLA build takes longer."""


def build(*args: str) -> subprocess.CompletedProcess[str]:
    return run_edgebox("build-engine", *args, timeout_s=BUILD_TIMEOUT_S)


def this_gpu() -> tuple[str, str]:
    cuda.init()
    device = cuda.Device(0)
    major, minor = device.compute_capability()
    return str(device.name()), f"{major}.{minor}"


def dla_cores() -> int:
    return int(trt.Builder(trt.Logger(trt.Logger.ERROR)).num_DLA_cores)


def engine_io(plan: bytes) -> dict[str, tuple[str, tuple[int, ...]]]:
    runtime = trt.Runtime(trt.Logger(trt.Logger.ERROR))
    engine = runtime.deserialize_cuda_engine(plan)
    assert engine is not None, "the published engine does not deserialize"
    io = {}
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        mode = "input" if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else "output"
        io[name] = (mode, tuple(engine.get_tensor_shape(name)))
    return io


@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_the_lane_model_builds_with_fp16_into_a_new_version(tmp_path: Path) -> None:
    onnx = build_lane_model(tmp_path / "lane.onnx")
    repo = tmp_path / "repo"
    repo.mkdir()

    result = build(
        str(onnx), "--repository", str(repo), "--model", "lane_detector", "--fp16",
        "--min-shapes", "input:1x3x360x640", "--opt-shapes", "input:2x3x360x640",
        "--max-shapes", "input:4x3x360x640",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    version = repo / "lane_detector" / "1"
    assert result.stdout.endswith(f"published model 'lane_detector' version 1 to {version}\n")
    assert sorted(os.listdir(version)) == ["engine_build.json", "model.plan"]
    assert engine_io((version / "model.plan").read_bytes()) == {
        "input": ("input", (-1, 3, 360, 640)),
        "predict_lanes": ("output", (-1, LANE_ANCHORS, LANE_VALUES)),
    }
    record = json.loads((version / "engine_build.json").read_text())
    name, capability = this_gpu()
    assert (record["tensorrt_version"], record["device_name"], record["compute_capability"]) == (
        trt.__version__,
        name,
        capability,
    )
    assert (record["precision"], record["dla_core"], record["gpu_fallback"]) == (
        "fp16",
        None,
        False,
    )
    config = read_model_config(repo / "lane_detector")
    assert (config.platform, config.max_batch_size) == ("tensorrt_plan", 4)
    assert [list(t.dims) for t in config.input] == [[3, 360, 640]]
    assert [list(t.dims) for t in config.output] == [[LANE_ANCHORS, LANE_VALUES]]


@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_the_lane_model_builds_for_dla_core_0_and_reports_placement(tmp_path: Path) -> None:
    if dla_cores() == 0:
        pytest.skip("this device has no DLA cores (an Orin Nano, or a desktop GPU)")
    onnx = build_lane_model(tmp_path / "lane.onnx")
    repo = tmp_path / "repo"
    repo.mkdir()

    result = build(
        str(onnx), "--repository", str(repo), "--model", "lane_dla", "--fp16",
        "--dla-core", "0", "--gpu-fallback", "--opt-shapes", "input:1x3x360x640",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "layer placement (DLA core 0, GPU fallback on): " in result.stdout
    version = repo / "lane_dla" / "1"
    record = json.loads((version / "engine_build.json").read_text())
    assert (record["dla_core"], record["gpu_fallback"]) == (0, True)
    [group] = read_model_config(repo / "lane_dla").instance_group
    assert [d.device_id for d in group.secondary_devices] == [0]
