"""Hardware: the TensorRT backend on a real GPU (a Jetson Orin, or any CUDA
machine with TensorRT 8.5+ and pycuda).

An engine is built here from the ONNX lane model (``build_lane_model``) with
TensorRT's plain builder API, loaded through the backend and through a real
daemon, and its outputs compared with ONNX Runtime's within FP16 tolerance;
the demo's constructed detector, built as an FP16 engine, is scored on the
synthetic roads like the ONNX one.
Skipped, with the reason, where TensorRT, pycuda or a CUDA GPU is missing;
the DLA test also needs a device with DLA cores (AGX Orin, Orin NX).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

trt = pytest.importorskip(
    "tensorrt", reason="TensorRT is not installed (on a Jetson: JetPack's python3-libnvinfer)"
)
if not hasattr(trt, "Runtime"):
    pytest.skip(f"'tensorrt' here is not TensorRT's bindings: {trt!r}", allow_module_level=True)
cuda = pytest.importorskip("pycuda.driver", reason="pycuda is not installed")


def _gpu_count() -> int:
    try:
        cuda.init()
        return cuda.Device.count()
    except Exception:
        return 0


if _gpu_count() == 0:
    pytest.skip("no CUDA GPU is visible to this process", allow_module_level=True)

from edgebox.backends.base import InstanceSpec, ModelContext  # noqa: E402
from edgebox.backends.tensorrt.backend import Backend  # noqa: E402
from edgebox.backends.tensorrt.trt_logger import tensorrt_logger  # noqa: E402
from edgebox.errors import Unavailable  # noqa: E402
from edgebox.repository.config import read_model_config  # noqa: E402
from edgebox.streams.synthetic_road import render_road  # noqa: E402
from edgebox.tensors import InferRequest, InferResponse, Tensor  # noqa: E402
from scripts.lane_accuracy import (  # noqa: E402
    ACCURACY_SEED_BASE,
    _load_model_module,
    score_frame,
)
from scripts.lane_detector import build_lane_detector  # noqa: E402
from scripts.onnx_builders import build_lane_model  # noqa: E402

pytestmark = pytest.mark.timeout(1200)

MAX_BATCH = 2


class LaneModel:
    def __init__(self, onnx_path: Path) -> None:
        self.onnx_path = onnx_path
        self.session = onnxruntime.InferenceSession(
            str(onnx_path), providers=["CPUExecutionProvider"]
        )
        (model_input,) = self.session.get_inputs()
        self.input_name = model_input.name
        self.image_shape = tuple(int(d) for d in model_input.shape[1:])
        self.output_name = self.session.get_outputs()[0].name

    def images(self, batch: int, seed: int = 0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return rng.random((batch, *self.image_shape), dtype=np.float32)

    def reference(self, images: np.ndarray) -> np.ndarray:
        return self.session.run([self.output_name], {self.input_name: images})[0]

    def build_plan(self, plan_path: Path, dla_core: int | None = None) -> Path:
        """TensorRT's plain builder API, with the process's logger (TensorRT
        keeps one logger per process; see trt_logger)."""
        logger = tensorrt_logger(trt)
        builder = trt.Builder(logger)
        flag = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
        network = builder.create_network(0 if flag is None else 1 << int(flag))
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(self.onnx_path.read_bytes()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            pytest.fail(f"TensorRT cannot parse {self.onnx_path}: {errors}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        if getattr(builder, "platform_has_fast_fp16", True) or dla_core is not None:
            config.set_flag(trt.BuilderFlag.FP16)
        smallest = (1, *self.image_shape)
        largest = smallest if dla_core is not None else (MAX_BATCH, *self.image_shape)
        profile = builder.create_optimization_profile()
        profile.set_shape(self.input_name, smallest, smallest, largest)
        config.add_optimization_profile(profile)
        if dla_core is not None:
            config.default_device_type = trt.DeviceType.DLA
            config.DLA_core = dla_core
            config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
        serialized = builder.build_serialized_network(network, config)
        assert serialized is not None, "TensorRT could not build the lane engine (see the log)"
        plan_path.parent.mkdir(parents=True, exist_ok=True)
        plan_path.write_bytes(memoryview(serialized))
        return plan_path


@pytest.fixture(scope="module")
def lane(tmp_path_factory) -> LaneModel:
    folder = tmp_path_factory.mktemp("lane_onnx")
    return LaneModel(build_lane_model(folder / "model.onnx"))


@pytest.fixture(scope="module")
def lane_plan(lane: LaneModel, tmp_path_factory) -> Path:
    return lane.build_plan(tmp_path_factory.mktemp("lane_plan") / "model.plan")


def lane_folder(root: Path, plan: Path, config: str = 'platform: "tensorrt_plan"\n') -> Path:
    model_dir = root / "lane"
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(config)
    shutil.copyfile(plan, model_dir / "1" / "model.plan")
    return model_dir


def context_of(model_dir: Path) -> ModelContext:
    return ModelContext(model_dir.name, 1, read_model_config(model_dir), model_dir, model_dir / "1")


def assert_fp16_close(actual: np.ndarray, expected: np.ndarray) -> None:
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=2e-2, atol=2e-2 * scale)


def test_lane_engine_matches_onnx_runtime_within_fp16_tolerance(tmp_path, lane, lane_plan):
    context = context_of(lane_folder(tmp_path, lane_plan))
    backend = Backend()
    backend.complete_config(context)
    assert context.config.max_batch_size == MAX_BATCH
    assert [t.name for t in context.config.input] == [lane.input_name]
    instance = backend.load_instance(context, InstanceSpec("lane_0_0", "GPU", 0))
    try:
        single, pair = lane.images(1, seed=1), lane.images(2, seed=2)
        results = instance.execute(
            [
                InferRequest("lane", [Tensor(lane.input_name, "FP32", single)]),
                InferRequest("lane", [Tensor(lane.input_name, "FP32", pair)]),
            ]
        )
        alone = instance.execute([InferRequest("lane", [Tensor(lane.input_name, "FP32", single)])])
    finally:
        instance.close()
        backend.unload(context)
    assert all(isinstance(r, InferResponse) for r in [*results, *alone]), [*results, *alone]
    assert_fp16_close(results[0].outputs[0].data, lane.reference(single))
    assert_fp16_close(results[1].outputs[0].data, lane.reference(pair))
    assert_fp16_close(alone[0].outputs[0].data, lane.reference(single))
    assert context.notes[0].startswith("layer placement: GPU: ")


def test_the_demo_detector_as_an_fp16_engine_finds_lanes_as_onnx_runtime_does(tmp_path):
    """The constructed detector makes discrete choices (TopK peaks, the
    horizon row, ArgMax), which FP16 may flip on a near tie, so its raw
    proposals are not compared element by element: its decoded lanes are
    scored against the synthetic roads' ground truth instead."""
    detector = LaneModel(build_lane_detector(tmp_path / "detector.onnx"))
    plan = detector.build_plan(tmp_path / "detector.plan")
    context = context_of(lane_folder(tmp_path / "repo", plan))
    backend = Backend()
    backend.complete_config(context)
    instance = backend.load_instance(context, InstanceSpec("lane_0_0", "GPU", 0))
    preprocess = _load_model_module("lane_preprocess")
    postprocess = _load_model_module("lane_postprocess")
    scores = []
    try:
        for i in range(40):
            road = render_road(ACCURACY_SEED_BASE + i)
            tensor = preprocess.to_model_input(road.image)
            (response,) = instance.execute(
                [InferRequest("lane", [Tensor(detector.input_name, "FP32", tensor)])]
            )
            assert isinstance(response, InferResponse), response
            _, lanes = postprocess.decode_lanes(response.outputs[0].data[0], 360, 640, 0.5, 20, 6)
            scores.append(score_frame(road.lanes, lanes))
    finally:
        instance.close()
        backend.unload(context)
    assert sum(s.passed for s in scores) >= 38, [s for s in scores if not s.passed]


def test_sidecar_from_another_tensorrt_is_refused_by_this_tensorrt(tmp_path, lane_plan):
    model_dir = lane_folder(tmp_path, lane_plan)
    (model_dir / "1" / "engine_build.json").write_text(
        json.dumps({"tensorrt_version": "7.1.3", "dla_core": None})
    )
    context = context_of(model_dir)
    with pytest.raises(Unavailable) as error:
        Backend().complete_config(context)
    assert (
        f"was built by TensorRT 7.1.3 (engine_build.json), but this is TensorRT {trt.__version__}"
        in str(error.value)
    )


def test_a_file_that_is_no_engine_gets_tensorrts_own_error(tmp_path, lane_plan):
    model_dir = lane_folder(tmp_path, lane_plan)
    (model_dir / "1" / "model.plan").write_bytes(b"not really an engine" * 64)
    with pytest.raises(Unavailable) as error:
        Backend().complete_config(context_of(model_dir))
    reason = str(error.value)
    assert trt.__version__ in reason
    assert "(TensorRT: " in reason, "the logger captured nothing from deserialize_cuda_engine"


def test_lane_engine_serves_through_the_daemon(tmp_path, lane, lane_plan, start_daemon):
    import tritonclient.http as httpclient

    repository = tmp_path / "repository"
    lane_folder(repository, lane_plan)
    daemon = start_daemon(repository)
    images = lane.images(1, seed=3)
    with httpclient.InferenceServerClient(daemon.url) as client:
        (entry,) = [e for e in client.get_model_repository_index() if e["name"] == "lane"]
        assert entry["state"] == "READY"
        assert entry["reason"].startswith("layer placement: GPU: ")
        request = httpclient.InferInput(lane.input_name, list(images.shape), "FP32")
        request.set_data_from_numpy(images)
        result = client.infer("lane", [request]).as_numpy(lane.output_name)
    assert_fp16_close(result, lane.reference(images))


def _dla_cores() -> int:
    return trt.Builder(tensorrt_logger(trt)).num_DLA_cores


@pytest.mark.skipif(_dla_cores() == 0, reason="this device has no DLA cores")
def test_dla_engine_reports_where_its_layers_run(tmp_path, lane):
    plan = lane.build_plan(tmp_path / "dla" / "model.plan", dla_core=0)
    config = (
        'platform: "tensorrt_plan"\n'
        "instance_group [ { kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA device_id: 0 } ] } ]\n"
    )
    context = context_of(lane_folder(tmp_path / "repo", plan, config))
    backend = Backend()
    backend.complete_config(context)
    instance = backend.load_instance(
        context, InstanceSpec("lane_0_0", "GPU", 0, (("KIND_NVDLA", 0),))
    )
    try:
        images = lane.images(1, seed=4)
        (result,) = instance.execute(
            [InferRequest("lane", [Tensor(lane.input_name, "FP32", images)])]
        )
    finally:
        instance.close()
        backend.unload(context)
    assert isinstance(result, InferResponse), result
    assert context.notes[0].startswith("layer placement: DLA core 0: ")
    scale = max(1.0, float(np.abs(lane.reference(images)).max()))
    np.testing.assert_allclose(
        result.outputs[0].data, lane.reference(images), rtol=5e-2, atol=5e-2 * scale
    )
