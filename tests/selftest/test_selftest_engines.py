"""The engines section on fixture trees of real Orin modules, with the demo
repository's real pipeline and ONNX Runtime as the reference and a fake
TensorRT (``FakeTensorRTBuildAndRun``) whose engines answer what each test
says: the section's order, what is "not on this machine", an engine that
moves lanes failing, the DLA fallback summary, and fps and power from a
fake clock and the AGX Orin's INA3221 files."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgebox.backends.tensorrt.placement import Placement
from edgebox.engine_build.placement import DLA, GPU, LayerPlacement, PlacementReport
from edgebox.selftest.agreement import agreement
from edgebox.selftest.detector_case import DetectorCase
from edgebox.selftest.engine_placement import placement_line
from edgebox.selftest.engine_target import output_check
from edgebox.selftest.engines import engine_checks
from edgebox.selftest.report import Status
from edgebox.selftest.timed_run import run_for
from edgebox.telemetry.sysfs_source import SysfsSource
from fakes.fake_clock import FakeClock
from fakes.fake_tensorrt_build_and_run import FakeTensorRTBuildAndRun
from fakes.fake_tensorrt_runtime import FakePycudaDriver
from model_fixtures import copy_demo_repository

FIXTURES = Path(__file__).resolve().parent.parent / "telemetry" / "fixtures"
AGX_ORIN = FIXTURES / "agx_orin"
ORIN_NANO = FIXTURES / "orin_nano"
SECONDS_A_FRAME = 0.25
"""What each fake engine run takes on the fake clock."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return copy_demo_repository(tmp_path_factory.mktemp("engines") / "models")


@pytest.fixture(scope="module")
def reference(demo) -> dict[str, np.ndarray]:
    """ONNX Runtime's answer to the road frame: what a right engine answers."""
    with DetectorCase(demo) as case:
        return case.reference


class Engines:
    """A fake TensorRT and pycuda on a fake clock: each run takes
    ``SECONDS_A_FRAME``; ``wrong`` maps a DLA core (None: the GPU) to how
    that engine spoils the reference answer."""

    def __init__(self, reference, dla_cores=2, wrong=None, **fake) -> None:
        self.clock = FakeClock()
        self.cuda = FakePycudaDriver()
        self.reference = reference
        self.wrong = wrong or {}
        self.tensorrt = FakeTensorRTBuildAndRun(self.cuda, self.answer, dla_cores=dla_cores, **fake)

    def answer(self, dla_core, feeds):
        assert feeds["input"].shape == (1, 3, 360, 640)
        self.clock.advance(SECONDS_A_FRAME)
        answer = {name: array.copy() for name, array in self.reference.items()}
        spoil = self.wrong.get(dla_core)
        return spoil(answer) if spoil is not None else answer

    def importer(self, name):
        return {"tensorrt": self.tensorrt, "pycuda.driver": self.cuda}.get(name)

    def checks(self, root, repository, seconds=2.0):
        return engine_checks(
            root, repository, seconds=seconds, importer=self.importer, clock=self.clock
        )


def by_name(checks):
    return {check.name: check for check in checks}


def shifted_right(px):
    def spoil(answer):
        answer["predict_lanes"][..., 5:] += px
        return answer

    return spoil


def test_an_agx_orin_builds_and_times_the_detector_on_the_gpu_and_both_dla_cores(demo, reference):
    engines = Engines(reference, dla_unsupported_kinds=frozenset({"TOPK"}))
    checks = engines.checks(AGX_ORIN, demo)
    assert [c.name for c in checks] == [
        "detector",
        *(
            f"{t} {what}"
            for t in ("GPU", "DLA 0", "DLA 1")
            for what in ("build", "output", "speed")
        ),
    ]
    assert {c.section for c in checks} == {"engines"}
    assert [c.status for c in checks] == [Status.PASS] * len(checks)
    named = by_name(checks)
    assert "finds 3 lanes" in named["detector"].detail
    assert named["GPU build"].detail.startswith("FP16, built in 0 s; layer placement: GPU: ")
    # The demo detector's two TopK nodes cannot run on the (fake) DLA: with GPU
    # fallback they run on the GPU, and the build line names them.
    dla_build = named["DLA 0 build"]
    assert "DLA core 0: 1 layer; GPU fallback: 2 layers (" in dla_build.detail
    assert dla_build.detail.endswith("(TopK_55, TopK_314)")
    assert dla_build.facts["gpu_fallback"] == ["TopK_55", "TopK_314"]
    builds = engines.tensorrt.building.builds
    assert [(b.default_device_type, b.dla_core) for b in builds] == [
        ("GPU", -1),
        ("DLA", 0),
        ("DLA", 1),
    ]
    assert all("FP16" in b.flags for b in builds)
    assert ["GPU_FALLBACK" in b.flags for b in builds] == [False, True, True]
    assert named["GPU output"].facts["lanes"] == named["GPU output"].facts["reference_lanes"] == 3
    power_mw = SysfsSource(AGX_ORIN).read().total_power_mw
    for target in ("GPU", "DLA 0", "DLA 1"):
        speed = named[f"{target} speed"]
        assert speed.facts["frames"] == 2.0 / SECONDS_A_FRAME
        assert speed.facts["fps"] == 1 / SECONDS_A_FRAME
        assert speed.facts["power_mw"] == round(power_mw)
        assert speed.detail == f"4.0 fps over 2 s, board {power_mw / 1000:.1f} W (1686 mJ a frame)"
    assert engines.cuda.retained == 0, "every CUDA thread detached its context"


def test_an_engine_whose_lanes_move_fails_its_output_check_and_the_others_pass(demo, reference):
    engines = Engines(reference, wrong={1: shifted_right(5)})
    named = by_name(engines.checks(AGX_ORIN, demo))
    wrong = named["DLA 1 output"]
    assert wrong.status is Status.FAIL
    assert wrong.detail == "lanes: mean point distance 5.0 px > max_px 2.0; max |diff| 5"
    assert named["GPU output"].status is named["DLA 0 output"].status is Status.PASS
    assert named["DLA 1 speed"].status is Status.PASS


def test_an_engine_that_loses_a_lane_fails_naming_both_counts(demo, reference):
    def drop_lanes(answer):
        answer["predict_lanes"][..., 1] = -50.0  # every anchor's lane logit: no lane anywhere
        return answer

    engines = Engines(reference, dla_cores=0, wrong={None: drop_lanes})
    check = by_name(engines.checks(ORIN_NANO, demo))["GPU output"]
    assert check.status is Status.FAIL
    assert check.detail.startswith("0 lanes, ONNX Runtime sees 3; max |diff| ")


def test_an_orin_nano_has_a_gpu_engine_and_no_dla(demo, reference):
    engines = Engines(reference, dla_cores=0)
    checks = engines.checks(ORIN_NANO, demo)
    assert [c.name for c in checks] == [
        "detector",
        "GPU build",
        "GPU output",
        "GPU speed",
        "DLA",
    ]
    assert checks[-1].status is Status.ABSENT
    assert "no DLA cores" in checks[-1].detail
    assert all(c.status is Status.PASS for c in checks[:-1])


def test_a_failed_build_fails_its_target_alone_with_tensorrts_reason(demo, reference):
    engines = Engines(reference, dla_cores=0)
    engines.tensorrt.building.build_error = "out of memory while timing tactics"
    named = by_name(engines.checks(ORIN_NANO, demo))
    assert named["GPU build"].status is Status.FAIL
    assert "out of memory while timing tactics" in named["GPU build"].detail
    assert "GPU output" not in named and "GPU speed" not in named
    assert engines.cuda.retained == 0


def test_an_engine_that_raises_when_run_fails_its_output_and_is_not_timed(demo, reference):
    def wrong_shape(answer):
        return {"predict_lanes": answer["predict_lanes"][:, :10]}

    engines = Engines(reference, dla_cores=0, wrong={None: wrong_shape})
    named = by_name(engines.checks(ORIN_NANO, demo))
    assert named["GPU output"].status is Status.FAIL
    assert named["GPU output"].detail.startswith("the engine did not answer: ")
    assert "GPU speed" not in named


def test_off_a_jetson_the_section_is_not_on_this_machine_and_imports_nothing(tmp_path, demo):
    (tmp_path / "proc").mkdir()
    asked = []
    (check,) = engine_checks(tmp_path, demo, importer=asked.append)
    assert (check.name, check.status) == ("engines", Status.ABSENT)
    assert asked == []


@pytest.mark.parametrize(
    ("missing", "hint"),
    [("tensorrt", "python3-libnvinfer"), ("pycuda.driver", "pip install pycuda")],
)
def test_on_a_jetson_a_missing_tensorrt_or_pycuda_fails(demo, reference, missing, hint):
    engines = Engines(reference)

    def importer(name):
        return None if name == missing else engines.importer(name)

    (check,) = engine_checks(AGX_ORIN, demo, importer=importer)
    assert check.status is Status.FAIL
    assert hint in check.detail


def test_a_repository_without_the_demo_detector_is_not_configured(tmp_path, reference):
    (tmp_path / "models").mkdir()
    (check,) = Engines(reference).checks(AGX_ORIN, tmp_path / "models")
    assert (check.name, check.status) == ("detector", Status.SKIPPED)


def test_a_detector_without_a_pipeline_to_make_lanes_fails_saying_so(tmp_path, reference):
    models = copy_demo_repository(tmp_path / "models")
    shutil.rmtree(models / "lane_pipeline")
    (check,) = Engines(reference).checks(AGX_ORIN, models)
    assert (check.name, check.status) == ("detector", Status.FAIL)
    assert check.detail == (
        f"no ensemble in '{models}' runs 'lane_detector' and answers lanes (lane_scores, "
        "lane_points, lane_point_counts), as the demo's lane_pipeline does"
    )


def test_a_run_of_20_s_counts_frames_and_averages_power_on_the_clock():
    clock = FakeClock()
    readings = iter([None, *[5000.0, 7000.0] * 100])

    def frame():
        clock.advance(1 / 32)

    figures = run_for(frame, 20.0, clock, read_power_mw=lambda: next(readings))
    assert (figures.frames, figures.elapsed_s, figures.fps) == (640, 20.0, 32.0)
    # Readings every 0.5 s from 0.5 s in: 39 taken, the first unreadable.
    assert len(figures.power_mw) == 38
    assert figures.mean_power_mw == 6000.0
    assert figures.energy_per_frame_mj == 6000.0 / 32


def test_a_run_without_power_has_no_power_figure():
    clock = FakeClock()
    figures = run_for(lambda: clock.advance(3.0), 20.0, clock)
    assert (figures.frames, figures.elapsed_s) == (7, 21.0)
    assert figures.mean_power_mw is None and figures.energy_per_frame_mj is None


def lanes(*xs_per_lane):
    """Post-processed lanes: one lane per x, each a vertical line of 10 points."""
    points = [np.stack([np.full(10, x), np.arange(10.0) * 30], 1) for x in xs_per_lane]
    return {
        "lane_scores": np.ones(len(xs_per_lane), np.float32),
        "lane_points": np.concatenate(points).astype(np.float32) if points else np.zeros((0, 2)),
        "lane_point_counts": np.full(len(xs_per_lane), 10, np.int32),
    }


def test_lanes_decide_and_the_raw_difference_is_reported_beside_them():
    raw = {"predict_lanes": np.zeros((1, 4, 77), np.float32)}
    moved = {"predict_lanes": raw["predict_lanes"] + np.float32(40.0)}
    close = agreement(raw, moved, lanes(100, 300), lanes(101.5, 299), max_px=2.0)
    assert close.lanes_agree and close.worst_diff == 40.0
    far = agreement(raw, raw, lanes(100, 300), lanes(103, 303), max_px=2.0)
    assert not far.lanes_agree
    assert far.detail == "lanes: mean point distance 3.0 px > max_px 2.0"
    fewer = agreement(raw, raw, lanes(100, 300), lanes(100), max_px=2.0)
    assert (fewer.lanes_agree, fewer.detail) == (False, "1 lanes, ONNX Runtime sees 2")


def test_fp16_overflow_is_counted_and_warns_even_when_lanes_agree():
    raw = {"predict_lanes": np.zeros((1, 4, 77), np.float32)}
    overflowed = {"predict_lanes": raw["predict_lanes"].copy()}
    overflowed["predict_lanes"][0, :2, 0] = [np.inf, np.nan]
    verdict = agreement(raw, overflowed, lanes(100), lanes(100), max_px=2.0)
    assert (verdict.lanes_agree, verdict.non_finite, verdict.worst_diff) == (True, 2, 0.0)
    check = output_check("DLA 0 output", verdict, 2.0)
    assert check.status is Status.WARN
    assert "2 values NaN or infinite (FP16 overflow)" in check.detail


def test_an_answer_of_another_shape_is_not_compared():
    raw = {"predict_lanes": np.zeros((1, 4, 77), np.float32)}
    verdict = agreement(raw, {"predict_lanes": raw["predict_lanes"][:, :2]}, lanes(1), lanes(1), 2)
    assert not verdict.lanes_agree
    assert (
        verdict.detail == "output 'predict_lanes' has shape [1, 2, 77], ONNX Runtime's [1, 4, 77]"
    )


PLANNED = PlacementReport(
    dla_core=0,
    gpu_fallback=True,
    layers=(
        LayerPlacement("conv1", "CONVOLUTION", DLA),
        LayerPlacement("relu1", "ACTIVATION", DLA),
        LayerPlacement("topk", "TOPK", GPU),
    ),
)


def test_a_dla_engine_lists_what_fell_back_to_the_gpu():
    inspected = Placement(0, dla_layers=("{ForeignNode[conv1...relu1]}",), gpu_layers=("topk",))
    status, detail, facts = placement_line(0, inspected, PLANNED)
    assert status is Status.PASS
    assert detail == "layer placement: DLA core 0: 1 layer; GPU fallback: 1 layer (topk)"
    assert facts["gpu_fallback"] == ["topk"]
    assert facts["network_layers_dla_capable"] == 2


def test_a_dla_engine_that_runs_nothing_on_the_dla_warns():
    inspected = Placement(0, gpu_layers=("conv1", "relu1", "topk"))
    status, detail, _ = placement_line(0, inspected, PLANNED)
    assert status is Status.WARN
    assert detail.endswith("GPU fallback: 3 layers (conv1, relu1, topk): nothing runs on the DLA")


def test_without_the_inspector_the_builders_view_stands_in():
    unknown = Placement(0, unknown_reason="the engine lists no layers")
    status, detail, _ = placement_line(0, unknown, PLANNED)
    assert status is Status.PASS
    assert detail.startswith("2 of 3 network layers can run on the DLA; layer placement unknown")
    nothing = PlacementReport(0, True, tuple(LayerPlacement(n, "TOPK", GPU) for n in "ab"))
    assert placement_line(0, unknown, nothing)[0] is Status.WARN
