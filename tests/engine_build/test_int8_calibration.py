"""INT8 calibration: images from a folder go through the repository's own
python preprocessing model (run by edgebox's real python backend) and reach
TensorRT's calibrator as batches in device memory; the cache lands next to
the engine and makes the next build of the same ONNX skip the images.

The fake builder (``fakes/fake_tensorrt_builder.py``) calls the calibrator as
TensorRT does and records the bytes it finds at the device pointers, so the
tests compare them with the preprocessing computed independently here.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from edgebox.engine_build.command import build_engine
from edgebox.engine_build.options import parse_build_options
from edgebox.engine_build.preprocessing import find_preprocessing
from edgebox.errors import EdgeboxError, InvalidArgument, NotFound
from fakes.fake_tensorrt_builder import FakeCudaDriver, FakeTensorRT
from model_fixtures import write_model

cv2 = pytest.importorskip("cv2", reason="OpenCV reads the calibration images (the cpu extra)")

BATCH_FLAGS = {
    "min_shapes": "input:1x3x4x6",
    "opt_shapes": "input:2x3x4x6",
    "max_shapes": "input:4x3x4x6",
}


def expected_preprocessing(image: np.ndarray) -> np.ndarray:
    """What the test repository's 'pre' model should make of one image: BGR
    HxWx3 uint8 -> RGB 1x3xHxW float32 in [0, 1], computed another way."""
    rgb = image[:, :, [2, 1, 0]].astype(np.float32)
    return (np.moveaxis(rgb, -1, 0) / np.float32(255.0))[np.newaxis]


def write_images(folder: Path, count: int, size: tuple[int, int] = (4, 6)) -> list[np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    images = []
    for index in range(count):
        image = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        assert cv2.imwrite(str(folder / f"frame_{index:03d}.png"), image)
        images.append(image)
    (folder / "notes.txt").write_text("not an image; ignored")
    return images


class Int8Build:
    def __init__(self, trt: FakeTensorRT, cuda: FakeCudaDriver) -> None:
        self.trt, self.cuda = trt, cuda
        self.lines: list[str] = []

    def __call__(self, onnx: Path, repo: Path, calib: Path, model: str = "det", **flags) -> Path:
        flags = {"int8": True, "calibration_dir": calib, **flags}
        options = parse_build_options(onnx, repo, model, **flags)
        return build_engine(options, tensorrt=self.trt, cuda=self.cuda, report=self.lines.append)


@pytest.fixture
def build(fake_trt: FakeTensorRT, fake_cuda: FakeCudaDriver) -> Int8Build:
    return Int8Build(fake_trt, fake_cuda)


@pytest.fixture
def calib(tmp_path: Path) -> Path:
    return tmp_path / "calib"


def test_calibration_batches_are_the_preprocessing_models_outputs(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    images = write_images(calib, 5)

    published = build(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)

    [record] = build.trt.builds
    expected = [expected_preprocessing(image) for image in images]
    assert record.calibration_batches == [
        {"input": np.concatenate(expected[0:2]).tobytes()},
        {"input": np.concatenate(expected[2:4]).tobytes()},
    ]
    assert record.flags == {"INT8"}
    assert record.calibration_profile == {"input": ((2, 3, 4, 6),) * 3}
    assert record.profiles == [{"input": ((1, 3, 4, 6), (2, 3, 4, 6), (4, 3, 4, 6))}]
    assert (published / "calibration.cache").read_bytes() == b"fake-entropy-cache: 2 batches\n"
    assert sorted(os.listdir(published)) == ["calibration.cache", "engine_build.json", "model.plan"]
    assert (
        f"calibration: 5 image(s) from '{calib}' through model 'pre' (from ensemble 'pipe'), "
        "2 batch(es) of 2, 1 left over"
    ) in build.lines
    assert "calibrated with 2 batch(es)" in build.lines


def test_device_buffers_are_freed_and_the_model_folder_leaves_sys_path(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 2)

    build(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)

    assert build.cuda.memory == {}
    assert len(build.cuda.freed) == 1
    assert str(pipeline_repo / "pre" / "1") not in sys.path


def test_int8_on_the_dla_records_int8_with_fp16_fallback_allowed(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 1)

    published = build(
        tiny_onnx, pipeline_repo, calib, fp16=True, dla_core="0", opt_shapes="input:1x3x4x6"
    )

    [record] = build.trt.builds
    assert record.flags == {"INT8", "FP16"}
    assert (record.default_device_type, record.dla_core) == ("DLA", 0)
    assert len(record.calibration_batches) == 1
    assert "INT8 and FP16, DLA core 0 without GPU fallback" in build.lines[0]
    assert (published / "engine_build.json").read_text().count('"precision": "int8"') == 1


# ------------------------------------------------------------------ the cache


def test_a_rebuild_of_the_same_onnx_reuses_the_cache_without_the_images(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 4)
    first = build(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)
    shutil.rmtree(pipeline_repo / "pre")
    build.lines.clear()

    second = build(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)

    record = build.trt.builds[-1]
    assert record.calibration_cache_read == (first / "calibration.cache").read_bytes()
    assert record.calibration_batches == []
    assert (second / "calibration.cache").read_bytes() == (first / "calibration.cache").read_bytes()
    assert (
        "calibration: reusing the cache of version 1 (same ONNX file and TensorRT version); "
        "pass --recalibrate to calibrate from the images again"
    ) in build.lines


def test_recalibrate_ignores_the_cache(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 4)
    build(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)

    build(tiny_onnx, pipeline_repo, calib, recalibrate=True, **BATCH_FLAGS)

    record = build.trt.builds[-1]
    assert (record.calibration_cache_read, len(record.calibration_batches)) == (None, 2)


def test_another_onnx_file_is_calibrated_afresh(
    build: Int8Build, make_detector, pipeline_repo: Path, calib: Path, tmp_path: Path
) -> None:
    write_images(calib, 2)
    build(make_detector(tmp_path / "a.onnx"), pipeline_repo, calib, **BATCH_FLAGS)

    build(make_detector(tmp_path / "b.onnx", op="Sigmoid"), pipeline_repo, calib, **BATCH_FLAGS)

    record = build.trt.builds[-1]
    assert (record.calibration_cache_read, len(record.calibration_batches)) == (None, 1)


def test_a_cache_tensorrt_rejects_asks_for_recalibration(
    fake_cuda: FakeCudaDriver, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 2)
    Int8Build(FakeTensorRT(fake_cuda), fake_cuda)(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)
    before = sorted(os.listdir(pipeline_repo / "det"))
    strict = Int8Build(FakeTensorRT(fake_cuda, reject_calibration_cache=True), fake_cuda)

    with pytest.raises(EdgeboxError) as info:
        strict(tiny_onnx, pipeline_repo, calib, **BATCH_FLAGS)

    assert str(info.value) == (
        "calibration: TensorRT did not accept the calibration cache of version 1 and asked for "
        "images; run again with --recalibrate"
    )
    assert sorted(os.listdir(pipeline_repo / "det")) == before


# ------------------------------------------------------------------ finding the preprocessing


def test_preprocess_model_names_the_model_when_no_ensemble_does(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    images = write_images(calib, 2)

    build(tiny_onnx, pipeline_repo, calib, "det_trt", preprocess_model="pre", **BATCH_FLAGS)

    [record] = build.trt.builds
    expected = np.concatenate([expected_preprocessing(image) for image in images])
    assert record.calibration_batches == [{"input": expected.tobytes()}]
    assert any("through model 'pre' (from --preprocess-model)" in line for line in build.lines)


def test_without_an_ensemble_the_user_is_asked_for_the_preprocess_model(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 2)

    with pytest.raises(NotFound) as info:
        build(tiny_onnx, pipeline_repo, calib, "det_trt", **BATCH_FLAGS)

    assert str(info.value) == (
        f"no ensemble in '{pipeline_repo}' feeds every input of model 'det_trt' from a python "
        "model (ensembles: 'pipe'); pass --preprocess-model NAME to calibrate through that model"
    )
    assert build.trt.builds == []


def test_ensembles_that_disagree_on_the_preprocessing_are_refused(pipeline_repo: Path) -> None:
    shutil.copytree(pipeline_repo / "pre", pipeline_repo / "pre2")
    pre2_config = pipeline_repo / "pre2" / "config.pbtxt"
    pre2_config.write_text(pre2_config.read_text().replace('name: "pre"', 'name: "pre2"'))
    pipe = (pipeline_repo / "pipe" / "config.pbtxt").read_text()
    write_model(
        pipeline_repo,
        "pipe2",
        pipe.replace('name: "pipe"', 'name: "pipe2"').replace('"pre"', '"pre2"'),
    )

    with pytest.raises(InvalidArgument) as info:
        find_preprocessing(pipeline_repo, "det", ["input"])

    assert str(info.value) == (
        f"ensembles in '{pipeline_repo}' feed model 'det' from different python models "
        "('pre', 'pre2'); choose one with --preprocess-model NAME"
    )
    plan = find_preprocessing(pipeline_repo, "det", ["input"], override="pre2")
    assert (plan.model, plan.feeds, plan.found_in) == (
        "pre2",
        (("input", "tensor"),),
        "--preprocess-model",
    )


def test_a_preprocess_model_that_is_not_python_is_refused(pipeline_repo: Path) -> None:
    write_model(pipeline_repo, "onnx_pre", 'platform: "onnxruntime_onnx"\n')

    with pytest.raises(InvalidArgument) as info:
        find_preprocessing(pipeline_repo, "det", ["input"], override="onnx_pre")

    assert str(info.value) == (
        "--preprocess-model 'onnx_pre': it is a 'onnxruntime' model; calibration runs a "
        "python-backend model.py"
    )


# ------------------------------------------------------------------ bad images and outputs


def test_an_unreadable_first_image_stops_before_the_build(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    calib.mkdir()
    (calib / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")

    with pytest.raises(InvalidArgument) as info:
        build(tiny_onnx, pipeline_repo, calib, opt_shapes="input:1x3x4x6")

    assert str(info.value) == f"calibration image '{calib}/broken.jpg': cannot be read as an image"
    assert build.trt.builds == []


def test_a_failure_during_calibration_is_raised_after_the_build_and_nothing_is_published(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 3)
    (calib / "frame_001.png").write_bytes(b"truncated")
    before = sorted(os.listdir(pipeline_repo))

    with pytest.raises(InvalidArgument) as info:
        build(tiny_onnx, pipeline_repo, calib, opt_shapes="input:1x3x4x6")

    assert str(info.value) == (
        f"calibration image '{calib}/frame_001.png': cannot be read as an image"
    )
    [record] = build.trt.builds
    assert len(record.calibration_batches) == 1
    assert sorted(os.listdir(pipeline_repo)) == before


def test_an_output_that_does_not_fit_the_engine_input_is_refused(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 1, size=(8, 8))

    with pytest.raises(InvalidArgument) as info:
        build(tiny_onnx, pipeline_repo, calib, opt_shapes="input:1x3x4x6")

    assert str(info.value) == (
        f"calibration sample '{calib}/frame_000.png', input 'input': shape 1x3x8x8 does not fit "
        "the calibration batch shape 1x3x4x6"
    )


def test_fewer_images_than_one_batch_are_refused(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 3)

    with pytest.raises(InvalidArgument) as info:
        build(tiny_onnx, pipeline_repo, calib, opt_shapes="input:4x3x4x6")

    assert str(info.value) == (
        "calibration: fewer samples than one batch of 4 (the batch size in --opt-shapes); add "
        "images or lower the batch"
    )


def test_a_preprocessing_model_that_raises_names_the_image(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    write_images(calib, 1)
    model_py = pipeline_repo / "pre" / "1" / "model.py"
    model_py.write_text(
        model_py.read_text().replace(
            "image = pb_utils", "raise ValueError('no lens')\n            image = pb_utils"
        )
    )

    with pytest.raises(EdgeboxError) as info:
        build(tiny_onnx, pipeline_repo, calib, opt_shapes="input:1x3x4x6")

    assert str(info.value) == (
        f"calibration image '{calib}/frame_000.png': model 'pre' version 1: execute() raised "
        "ValueError: no lens (model.py line 9)"
    )


def test_an_empty_calibration_folder_is_refused(
    build: Int8Build, tiny_onnx: Path, pipeline_repo: Path, calib: Path
) -> None:
    calib.mkdir()

    with pytest.raises(NotFound) as info:
        build(tiny_onnx, pipeline_repo, calib)

    assert str(info.value) == (
        f"--calibration-dir '{calib}' holds no images (.jpg, .jpeg, .png, .bmp)"
    )
