"""The generated config.pbtxt, read back with edgebox's own loader
(``repository/config.py``) exactly as the daemon will read it, and the check
that an existing config fits a new engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2

from edgebox.engine_build.config_writer import (
    config_mismatches,
    engine_model_config,
    model_config_text,
)
from edgebox.engine_build.network_io import NetworkIO, TensorSpec
from edgebox.repository.config import read_model_config
from model_fixtures import write_model

LANE = NetworkIO(
    inputs=(TensorSpec("input", "FP32", (-1, 3, 360, 640)),),
    outputs=(TensorSpec("predict_lanes", "FP32", (-1, 2784, 77)),),
)
_Group = model_config_pb2.ModelInstanceGroup


def written_and_read_back(tmp_path: Path, io: NetworkIO, batch: int, dla_core: int | None):
    text = model_config_text(engine_model_config("lane", io, batch, dla_core), "'lane.onnx'")
    write_model(tmp_path, "lane", text)
    return text, read_model_config(tmp_path / "lane")


def test_a_batching_engine_config_reads_back_with_batchless_dims(tmp_path: Path) -> None:
    text, config = written_and_read_back(tmp_path, LANE, 8, None)

    assert (config.name, config.platform, config.backend) == ("lane", "tensorrt_plan", "tensorrt")
    assert config.max_batch_size == 8
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("input", model_config_pb2.TYPE_FP32, [3, 360, 640])
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [
        ("predict_lanes", model_config_pb2.TYPE_FP32, [2784, 77])
    ]
    assert config.default_model_filename == "model.plan"
    assert text.startswith("# Written by 'edgebox build-engine' from 'lane.onnx'")
    assert "  dims: [ 3, 360, 640 ]\n" in text


def test_a_non_batching_engine_keeps_full_dims(tmp_path: Path) -> None:
    io = NetworkIO(
        inputs=(TensorSpec("input", "FP16", (1, 3, 360, 640)), TensorSpec("k", "INT32", (4,))),
        outputs=(TensorSpec("y", "BOOL", (-1,)),),
    )
    _, config = written_and_read_back(tmp_path, io, 0, None)

    assert config.max_batch_size == 0
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("input", model_config_pb2.TYPE_FP16, [1, 3, 360, 640]),
        ("k", model_config_pb2.TYPE_INT32, [4]),
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [
        ("y", model_config_pb2.TYPE_BOOL, [-1])
    ]


@pytest.mark.parametrize("core", [0, 1])
def test_a_dla_engine_runs_its_instance_on_the_dla_core(tmp_path: Path, core: int) -> None:
    text, config = written_and_read_back(tmp_path, LANE, 1, core)

    [group] = config.instance_group
    assert (group.count, group.kind) == (1, _Group.KIND_GPU)
    assert [(d.kind, d.device_id) for d in group.secondary_devices] == [
        (_Group.SecondaryDevice.KIND_NVDLA, core)
    ]
    assert f"secondary_devices [ {{ kind: KIND_NVDLA device_id: {core} }} ]" in text


def test_a_gpu_engine_leaves_instance_groups_to_the_daemon(tmp_path: Path) -> None:
    text, config = written_and_read_back(tmp_path, LANE, 8, None)
    assert "instance_group" not in text
    assert [g.kind for g in config.instance_group] == [_Group.KIND_AUTO]


# ------------------------------------------------------------------ existing configs


def existing(tmp_path: Path, text: str):
    write_model(tmp_path, "lane", text)
    return read_model_config(tmp_path / "lane")


def test_a_config_made_for_the_engine_fits() -> None:
    config = engine_model_config("lane", LANE, 8, None)
    assert config_mismatches(config, LANE, 8, None) == []
    assert config_mismatches(config, LANE, 16, None) == []


def test_a_config_without_io_fits(tmp_path: Path) -> None:
    config = existing(tmp_path, 'platform: "tensorrt_plan"\n')
    assert config_mismatches(config, LANE, 1, None) == []


def test_an_onnx_model_config_does_not_fit_an_engine(tmp_path: Path) -> None:
    config = existing(tmp_path, 'platform: "onnxruntime_onnx"\nmax_batch_size: 1\n')
    assert config_mismatches(config, LANE, 8, None) == [
        "it is a 'onnxruntime_onnx' model; a TensorRT engine needs platform 'tensorrt_plan' "
        "(build into a new model name instead, e.g. --model NAME_trt)"
    ]


def test_other_tensor_names_and_a_larger_batch_do_not_fit(tmp_path: Path) -> None:
    config = existing(
        tmp_path,
        """
        platform: "tensorrt_plan"
        max_batch_size: 16
        input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 360, 640 ] } ]
        output [ { name: "predict_lanes" data_type: TYPE_FP32 dims: [ 2784, 77 ] } ]
        """,
    )
    assert config_mismatches(config, LANE, 8, None) == [
        "inputs: the engine has 'input', the config has 'images'",
        "max_batch_size 16: the engine's profile allows at most 8; raise the batch in --max-shapes",
    ]
    assert config_mismatches(config, LANE, 0, None)[-1] == (
        "max_batch_size 16: the engine does not batch (its profile does not start the batch "
        "at 1); raise the batch in --max-shapes"
    )


def test_dla_instances_do_not_fit_a_gpu_engine(tmp_path: Path) -> None:
    config = engine_model_config("lane", LANE, 1, 1)
    assert config_mismatches(config, LANE, 1, 1) == []
    assert config_mismatches(config, LANE, 1, None) == [
        "its instance_group runs instances on DLA core 1 (KIND_NVDLA), but this engine is built "
        "for the GPU; add --dla-core 1 or edit instance_group"
    ]
