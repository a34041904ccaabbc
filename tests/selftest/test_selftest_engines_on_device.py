"""The engines section with the real TensorRT, pycuda, GPU, DLA cores and
INA3221 rails, on a Jetson. Skipped, with the reason, anywhere else.

Builds the demo detector for the GPU and every DLA core the builder reports,
as ``edgebox selftest`` does, with short timed runs: every engine must load,
give ONNX Runtime's lanes, and run with a power figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from installed_modules import installed

from edgebox.selftest.engines import engine_checks
from edgebox.selftest.platform import on_jetson
from edgebox.selftest.report import Status
from model_fixtures import copy_demo_repository

trt = installed("tensorrt")
cuda = installed("pycuda.driver")
pytestmark = [
    pytest.mark.skipif(not on_jetson(Path("/")), reason="not a Jetson: the engines need one"),
    pytest.mark.skipif(trt is None, reason="TensorRT is absent (JetPack's python3-libnvinfer)"),
    pytest.mark.skipif(cuda is None, reason="pycuda is absent: engines run through pycuda"),
]


def test_the_demo_detector_runs_as_engines_on_the_gpu_and_every_dla_core(tmp_path):
    repository = copy_demo_repository(tmp_path / "models")
    checks = engine_checks(Path("/"), repository, seconds=2.0)
    named = {check.name: check for check in checks}
    cores = int(trt.Builder(trt.Logger(trt.Logger.ERROR)).num_DLA_cores)
    targets = ["GPU", *(f"DLA {core}" for core in range(cores))]
    expected = [
        "detector",
        *(f"{t} {what}" for t in targets for what in ("build", "output", "speed")),
    ]
    assert [c.name for c in checks] == expected + ([] if cores else ["DLA"]), checks
    assert named["detector"].status is Status.PASS, named["detector"]
    for target in targets:
        assert named[f"{target} build"].status is not Status.FAIL, named[f"{target} build"]
        assert named[f"{target} output"].status is Status.PASS, named[f"{target} output"]
        speed = named[f"{target} speed"]
        assert speed.status is Status.PASS, speed
        assert speed.facts["fps"] > 0 and speed.facts["power_mw"] > 0
