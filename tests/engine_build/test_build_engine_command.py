"""``build_engine``: the whole flow against a fake TensorRT and a fake pycuda
(``fakes/fake_tensorrt_builder.py``), handed in through the command's
``tensorrt`` and ``cuda`` parameters. The fake records what it was given and
"serializes" bytes, so each test checks what reached the builder, what the
user was told, and what landed in the repository (or that nothing did).
The last two tests watch a publish with the daemon's own repository poller,
then with the real daemon.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from cli_helpers import tree
from daemon_process import wait_for
from edgebox import __version__
from edgebox.engine_build.command import build_engine
from edgebox.engine_build.options import parse_build_options
from edgebox.errors import (
    EdgeboxError,
    ErrorCode,
    InvalidArgument,
    NotFound,
    Unavailable,
    Unsupported,
)
from edgebox.repository import publish as publish_module
from edgebox.repository.config import read_model_config
from edgebox.repository.layout import scan_model
from edgebox.repository.poller import RepositoryPoller
from fakes.fake_tensorrt_builder import (
    FakeCudaDriver,
    FakeTensorRT,
    fake_plan_summary,
)
from model_fixtures import ADD_SUB_CONFIG, write_model
from scripts.onnx_builders import build_lane_model

BUILT_AT = datetime(2025, 5, 1, 9, 30, tzinfo=timezone.utc)


class Build:
    """Runs ``build_engine`` with the fakes and keeps what the user was told."""

    def __init__(self, trt: FakeTensorRT, cuda: FakeCudaDriver) -> None:
        self.trt = trt
        self.cuda = cuda
        self.lines: list[str] = []

    def __call__(self, onnx: Path, repo: Path, model: str = "det", **flags) -> Path:
        options = parse_build_options(onnx, repo, model, **flags)
        return build_engine(
            options,
            tensorrt=self.trt,
            cuda=self.cuda,
            report=self.lines.append,
            now=lambda: BUILT_AT,
        )

    @property
    def record(self):
        [record] = self.trt.builds
        return record


@pytest.fixture
def build(fake_trt: FakeTensorRT, fake_cuda: FakeCudaDriver) -> Build:
    return Build(fake_trt, fake_cuda)


def sidecar(version_dir: Path) -> dict:
    return json.loads((version_dir / "engine_build.json").read_text())


# ------------------------------------------------------------------ a plain build


def test_an_fp16_build_publishes_engine_sidecar_and_config(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    published = build(tiny_onnx, repo, fp16=True)

    assert published == repo / "det" / "1"
    assert sorted(os.listdir(published)) == ["engine_build.json", "model.plan"]
    assert fake_plan_summary((published / "model.plan").read_bytes())["flags"] == ["FP16"]
    assert sidecar(published) == {
        "tensorrt_version": "8.6.2.3",
        "device_name": "Orin",
        "compute_capability": "8.7",
        "dla_core": None,
        "gpu_fallback": False,
        "precision": "fp16",
        "onnx_sha256": hashlib.sha256(tiny_onnx.read_bytes()).hexdigest(),
        "built_at": "2025-05-01T09:30:00Z",
        "edgebox_version": __version__,
    }
    config = read_model_config(repo / "det")
    assert (config.platform, config.max_batch_size) == ("tensorrt_plan", 1)
    assert [(t.name, list(t.dims)) for t in config.input] == [("input", [3, 4, 6])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("output", [3, 4, 6])]


def test_what_reached_the_builder(build: Build, tiny_onnx: Path, repo: Path) -> None:
    build(
        tiny_onnx,
        repo,
        fp16=True,
        workspace_mb="512",
        min_shapes="input:1x3x4x6",
        opt_shapes="input:4x3x4x6",
        max_shapes="input:8x3x4x6",
    )

    record = build.record
    assert record.flags == {"FP16"}
    assert record.memory_pool_limits == {"WORKSPACE": 512 << 20}
    assert record.profiles == [{"input": ((1, 3, 4, 6), (4, 3, 4, 6), (8, 3, 4, 6))}]
    assert (record.default_device_type, record.calibration_profile) == ("GPU", None)
    assert build.trt.plugins_initialized == 1
    assert read_model_config(repo / "det").max_batch_size == 8
    assert build.lines[1] == "input 'input': min 1x3x4x6, opt 4x3x4x6, max 8x3x4x6"


def test_fp32_sets_no_precision_flag_and_no_workspace_limit(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    published = build(tiny_onnx, repo)

    assert (build.record.flags, build.record.memory_pool_limits) == (set(), {})
    assert sidecar(published)["precision"] == "fp32"


@pytest.mark.parametrize(
    ("version", "network_flags"),
    [("8.5.2.2", 1), ("8.6.2.3", 1), ("10.3.0.30", 0)],
    ids=["TensorRT 8.5", "TensorRT 8.6", "TensorRT 10.3"],
)
def test_explicit_batch_is_asked_for_only_where_the_flag_exists(
    fake_cuda: FakeCudaDriver, tiny_onnx: Path, repo: Path, version: str, network_flags: int
) -> None:
    trt = FakeTensorRT(fake_cuda, version=version)
    published = Build(trt, fake_cuda)(tiny_onnx, repo, fp16=True)

    assert trt.network_flags == [network_flags]
    assert sidecar(published)["tensorrt_version"] == version


def test_the_user_is_told_what_is_built_and_what_was_defaulted(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    build(tiny_onnx, repo, fp16=True)

    assert build.lines == [
        f"building '{tiny_onnx}' for model 'det' with TensorRT 8.6.2.3 on Orin (compute 8.7): "
        "FP16, GPU",
        "note: input 'input' has dynamic dimensions [-1, 3, 4, 6] and no shapes were given; "
        "building for 1x3x4x6 as trtexec does (--min-shapes/--opt-shapes/--max-shapes set a "
        "range)",
        "input 'input': min 1x3x4x6, opt 1x3x4x6, max 1x3x4x6",
        "layer placement: all 1 layers on the GPU (no --dla-core)",
        "wrote config.pbtxt for model 'det' (platform tensorrt_plan, max_batch_size 1)",
    ]


def test_the_build_runs_in_the_devices_primary_context(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    build(tiny_onnx, repo, fp16=True)
    assert build.cuda.context_events == ["push", "pop", "detach"]


# ------------------------------------------------------------------ DLA


def test_a_dla_build_reports_the_layers_that_fell_back_to_the_gpu(
    fake_cuda: FakeCudaDriver, repo: Path, tmp_path: Path
) -> None:
    lane = build_lane_model(tmp_path / "lane.onnx")
    trt = FakeTensorRT(fake_cuda, dla_unsupported_kinds=frozenset({"RESIZE", "SHAPE"}))
    build = Build(trt, fake_cuda)

    published = build(lane, repo, "lane", fp16=True, dla_core="1", gpu_fallback=True)

    record = build.record
    assert (record.default_device_type, record.dla_core) == ("DLA", 1)
    assert record.flags == {"FP16", "GPU_FALLBACK"}
    assert (sidecar(published)["dla_core"], sidecar(published)["gpu_fallback"]) == (1, True)
    assert build.lines[-8:] == [
        "layer placement (DLA core 1, GPU fallback on): 8 of 10 layers on the DLA, 2 on the GPU",
        "  GPU  'Shape_4' (SHAPE): not supported on the DLA",
        "  GPU  'Resize_6' (RESIZE): not supported on the DLA",
        "TensorRT's placement after layer fusion:",
        "  [DlaLayer] {ForeignNode[Conv_0...Transpose_9]}",
        "  [GpuLayer] SHAPE: Shape_4",
        "  [GpuLayer] RESIZE: Resize_6",
        "wrote config.pbtxt for model 'lane' (platform tensorrt_plan, max_batch_size 1)",
    ]
    [group] = read_model_config(repo / "lane").instance_group
    assert [d.device_id for d in group.secondary_devices] == [1]


def test_a_dla_build_where_nothing_runs_on_the_dla_says_so(
    fake_cuda: FakeCudaDriver, tiny_onnx: Path, repo: Path
) -> None:
    trt = FakeTensorRT(fake_cuda, dla_unsupported_kinds=frozenset({"ACTIVATION"}))
    build = Build(trt, fake_cuda)

    build(tiny_onnx, repo, fp16=True, dla_core="0", gpu_fallback=True)

    assert "  warning: no layer runs on the DLA; this engine runs on the GPU only" in build.lines


def test_dla_without_fallback_lists_the_layers_it_cannot_run(
    fake_cuda: FakeCudaDriver, repo: Path, tmp_path: Path
) -> None:
    lane = build_lane_model(tmp_path / "lane.onnx")
    trt = FakeTensorRT(fake_cuda, dla_unsupported_kinds=frozenset({"RESIZE", "SHAPE"}))

    with pytest.raises(Unsupported) as info:
        Build(trt, fake_cuda)(lane, repo, "lane", fp16=True, dla_core="0")

    assert str(info.value) == (
        "--dla-core 0: 2 of 10 layers cannot run on the DLA: 'Shape_4' (SHAPE), "
        "'Resize_6' (RESIZE); add --gpu-fallback to run them on the GPU"
    )
    assert trt.builds == []
    assert tree(repo) == {}


@pytest.mark.parametrize(
    ("cores", "core", "error", "message"),
    [
        (
            2,
            "2",
            InvalidArgument,
            "--dla-core 2: this device has 2 DLA cores (0 to 1)",
        ),
        (
            0,
            "0",
            Unsupported,
            "--dla-core 0: this device has no DLA cores (Orin Nano has none; AGX Orin and "
            "Orin NX have two); build without --dla-core",
        ),
    ],
)
def test_a_dla_core_the_device_lacks_is_refused_before_parsing(
    fake_cuda: FakeCudaDriver,
    tiny_onnx: Path,
    repo: Path,
    cores: int,
    core: str,
    error: type,
    message: str,
) -> None:
    trt = FakeTensorRT(fake_cuda, dla_cores=cores)

    with pytest.raises(error) as info:
        Build(trt, fake_cuda)(tiny_onnx, repo, fp16=True, dla_core=core)

    assert str(info.value) == message
    assert trt.parsed_paths == []
    assert tree(repo) == {}


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("8.6.2.3", "  node 0: No importer registered for op: Relu"),
        ("10.3.0.30", "  node 0 'relu_0' (Relu): No importer registered for op: Relu"),
    ],
)
def test_an_onnx_parse_failure_prints_the_parsers_errors(
    fake_cuda: FakeCudaDriver, tiny_onnx: Path, repo: Path, version: str, line: str
) -> None:
    trt = FakeTensorRT(fake_cuda, version=version, unsupported_ops=frozenset({"Relu"}))

    with pytest.raises(InvalidArgument) as info:
        Build(trt, fake_cuda)(tiny_onnx, repo, fp16=True)

    assert str(info.value) == f"'{tiny_onnx}': TensorRT's ONNX parser failed:\n{line}"
    assert trt.builds == []
    assert tree(repo) == {}


def test_a_file_that_is_not_onnx_fails_in_the_parser(
    build: Build, repo: Path, tmp_path: Path
) -> None:
    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"\x00not an onnx file\xff" * 10)

    with pytest.raises(InvalidArgument) as info:
        build(garbage, repo, fp16=True)

    assert str(info.value) == (
        f"'{garbage}': TensorRT's ONNX parser failed:\n"
        f"  Failed to parse ONNX model from file: {garbage}"
    )


def test_a_failed_build_shows_tensorrts_errors_and_publishes_nothing(
    fake_cuda: FakeCudaDriver, tiny_onnx: Path, repo: Path
) -> None:
    trt = FakeTensorRT(
        fake_cuda, build_error="Requested amount of GPU memory could not be allocated"
    )

    with pytest.raises(EdgeboxError) as info:
        Build(trt, fake_cuda)(tiny_onnx, repo, fp16=True)

    assert str(info.value) == (
        "TensorRT could not build the engine:\n"
        "  Requested amount of GPU memory could not be allocated"
    )
    assert tree(repo) == {}


def test_an_unusable_gpu_is_reported(tiny_onnx: Path, repo: Path) -> None:
    cuda = FakeCudaDriver(
        init_error=RuntimeError("cuInit failed: no CUDA-capable device is detected")
    )

    with pytest.raises(Unavailable) as info:
        Build(FakeTensorRT(cuda), cuda)(tiny_onnx, repo, fp16=True)

    assert str(info.value) == (
        "CUDA device 0 is not usable: cuInit failed: no CUDA-capable device is detected"
    )


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("no repository", NotFound, "repository '{repo}/absent' is not a folder"),
        ("no onnx", NotFound, "ONNX file '{onnx}.missing' does not exist"),
        ("model is a file", InvalidArgument, "model 'det': '{repo}/det' is not a folder"),
    ],
)
def test_a_wrong_repository_or_file_is_refused_before_tensorrt_is_touched(
    build: Build, tiny_onnx: Path, repo: Path, case: str, error: type, message: str
) -> None:
    target_repo, onnx = repo, tiny_onnx
    if case == "no repository":
        target_repo = repo / "absent"
    elif case == "no onnx":
        onnx = Path(f"{tiny_onnx}.missing")
    else:
        (repo / "det").write_text("")

    with pytest.raises(error) as info:
        build(onnx, target_repo, fp16=True)

    assert str(info.value) == message.format(repo=repo, onnx=tiny_onnx)
    assert build.trt.loggers == []


def test_an_existing_config_that_cannot_serve_the_engine_stops_before_the_build(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    write_model(repo, "det", ADD_SUB_CONFIG.format(name="det"))
    before = tree(repo)

    with pytest.raises(InvalidArgument) as info:
        build(tiny_onnx, repo, fp16=True)

    assert str(info.value) == (
        f"model 'det': '{repo}/det/config.pbtxt' does not fit the engine: it is a "
        "'onnxruntime_onnx' model; a TensorRT engine needs platform 'tensorrt_plan' (build "
        "into a new model name instead, e.g. --model NAME_trt); inputs: the engine has "
        "'input', the config has 'INPUT0', 'INPUT1'; outputs: the engine has 'output', the "
        "config has 'OUTPUT0', 'OUTPUT1'; max_batch_size 8: the engine's profile allows at "
        "most 1; raise the batch in --max-shapes"
    )
    assert build.trt.builds == []
    assert tree(repo) == before


def test_a_config_with_a_syntax_error_is_reported_with_its_location(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    write_model(repo, "det", 'platform: "tensorrt_plan"\nmax_batch_size 8\n')

    with pytest.raises(EdgeboxError) as info:
        build(tiny_onnx, repo, fp16=True)

    assert str(info.value) == f"{repo}/det/config.pbtxt:2:16: 'max_batch_size 8': Expected \":\"."


# ------------------------------------------------------------------ versions


def test_the_next_version_follows_the_highest_and_keeps_the_config(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    build(tiny_onnx, repo, fp16=True)
    (repo / "det" / "3").mkdir()
    (repo / "det" / "3" / "model.plan").write_bytes(b"older engine")
    config_before = (repo / "det" / "config.pbtxt").read_bytes()

    published = build(tiny_onnx, repo, fp16=True)

    assert published == repo / "det" / "4"
    assert (repo / "det" / "config.pbtxt").read_bytes() == config_before
    assert "wrote config.pbtxt" not in " ".join(build.lines[-3:])
    assert list(scan_model(repo / "det").versions) == [1, 3, 4]


def test_an_explicit_version_is_used(build: Build, tiny_onnx: Path, repo: Path) -> None:
    assert build(tiny_onnx, repo, fp16=True, version="7") == repo / "det" / "7"


def test_an_existing_version_is_refused_before_building(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    build(tiny_onnx, repo, fp16=True)
    before = tree(repo)

    with pytest.raises(EdgeboxError) as info:
        build(tiny_onnx, repo, fp16=True, version="1")

    assert info.value.code == ErrorCode.ALREADY_EXISTS
    assert str(info.value) == (
        f"model 'det' version 1: '{repo}/det/1' already exists; versions are never "
        "overwritten, leave out --version to publish the next number"
    )
    assert len(build.trt.builds) == 1
    assert tree(repo) == before


def test_a_custom_model_filename_in_the_config_names_the_engine(
    build: Build, tiny_onnx: Path, repo: Path
) -> None:
    write_model(repo, "det", 'platform: "tensorrt_plan"\ndefault_model_filename: "det.engine"\n')

    published = build(tiny_onnx, repo, fp16=True)

    assert sorted(os.listdir(published)) == ["det.engine", "engine_build.json"]


# ------------------------------------------------------------------ what a poller sees


class FakeLifecycleManager:
    """Records what the repository poller asks the daemon's manager to load."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, dict[int, set[tuple[str, int]]]]] = []

    def load_model(self, name: str, folder=None, **_) -> None:
        versions = {
            number: {(path, size) for path, size, _mtime, _ctime in version.fingerprint}
            for number, version in folder.versions.items()
        }
        self.loads.append((name, versions))

    def forget_model(self, name: str) -> None:
        raise AssertionError(f"model '{name}' disappeared during the publish")


def test_a_polling_daemon_sees_the_new_version_complete_at_first_sight(
    build: Build, tiny_onnx: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own poller polls before and after every file the publish
    copies: the version must not exist for it until it is whole, and then be
    loaded at the very next poll with every file at its final size."""
    build(tiny_onnx, repo, fp16=True)
    manager = FakeLifecycleManager()
    poller = RepositoryPoller(manager, repo, poll_interval_s=3600)
    poller.prime()
    real_copy = publish_module._copy_file
    copies = []

    def copy_between_polls(source: Path, target: Path) -> None:
        poller.poll_once()
        real_copy(source, target)
        copies.append(source.name)
        poller.poll_once()
        assert 2 not in scan_model(repo / "det").versions
        assert manager.loads == []

    monkeypatch.setattr(publish_module, "_copy_file", copy_between_polls)

    published = build(tiny_onnx, repo, fp16=True)
    poller.poll_once()

    assert copies == ["engine_build.json", "model.plan"]
    files = {
        (name, (published / name).stat().st_size) for name in ("engine_build.json", "model.plan")
    }
    assert len(manager.loads) == 1
    name, versions = manager.loads[0]
    assert (name, sorted(versions)) == ("det", [1, 2])
    assert versions[2] == {(".", 0), *files}


def test_a_running_daemon_takes_the_published_engine_at_first_sight(
    build: Build, tiny_onnx: Path, repo: Path, start_daemon
) -> None:
    """The real daemon in poll mode: the new model is loaded once, without a
    "still changing" wait, from complete files. The fake engine cannot serve,
    so the version ends UNAVAILABLE, with a reason from the TensorRT backend
    (no TensorRT here, or a plan it cannot deserialize), never a missing file."""
    daemon = start_daemon(repo, "--model-control-mode", "poll", "--repository-poll-secs", "0.2")
    client = httpclient.InferenceServerClient(daemon.url)

    build(tiny_onnx, repo, fp16=True)

    def settled() -> dict | None:
        for entry in client.get_model_repository_index():
            if entry["name"] == "det" and entry.get("state") in ("READY", "UNAVAILABLE"):
                return entry
        return None

    entry = wait_for(settled, what="the daemon to load model 'det'")
    client.close()
    assert (entry["version"], entry["state"]) == ("1", "UNAVAILABLE")
    assert "TensorRT" in entry["reason"]
    assert "not found" not in entry["reason"]
    log = daemon.log()
    assert log.count("model 'det' version 1: LOADING") == 1
    assert "still changing; waiting" not in log
