"""Engines built by another TensorRT or for another device: the sidecar
``engine_build.json`` compared before deserializing, the errors TensorRT logs
when it refuses a plan, and the DLA core checks. Pure logic, pinned messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgebox.backends.tensorrt.compatibility import (
    DeviceInfo,
    EngineBuildInfo,
    build_mismatch,
    deserialize_failure,
    device_name_note,
    dla_problem,
    read_build_info,
    same_tensorrt_version,
)
from edgebox.errors import Unavailable

ORIN = DeviceInfo("Orin", "8.7")
PLAN = Path("/models/lane/1/model.plan")
SIDECAR = {
    "tensorrt_version": "8.6.2.3",
    "device_name": "Orin",
    "compute_capability": "8.7",
    "dla_core": 0,
    "gpu_fallback": True,
    "precision": "fp16",
    "onnx_sha256": "ab" * 32,
    "built_at": "2025-05-01T09:30:00Z",
    "edgebox_version": "0.4.0",
}


def write_sidecar(folder: Path, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "engine_build.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_sidecar_keys_are_read(tmp_path: Path) -> None:
    path = write_sidecar(tmp_path, SIDECAR)
    info = read_build_info(tmp_path)
    assert info == EngineBuildInfo(
        path=path,
        tensorrt_version="8.6.2.3",
        device_name="Orin",
        compute_capability="8.7",
        dla_core=0,
        gpu_fallback=True,
        precision="fp16",
        onnx_sha256="ab" * 32,
        built_at="2025-05-01T09:30:00Z",
        edgebox_version="0.4.0",
    )


def test_no_sidecar_is_not_an_error(tmp_path: Path) -> None:
    assert read_build_info(tmp_path) is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{", "is not valid JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]", "must hold a JSON object, not list"),
        ('{"dla_core": "0"}', "'dla_core' must be an integer or null, got '0'"),
    ],
)
def test_broken_sidecar_is_unavailable_naming_the_file(tmp_path: Path, content, expected) -> None:
    path = write_sidecar(tmp_path, content)
    with pytest.raises(Unavailable) as error:
        read_build_info(tmp_path)
    assert str(error.value).startswith(f"'{path}'")
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("8.6.2", "8.6.2.3", True),
        ("8.6.2.3", "8.6.2.3", True),
        ("8.5.2.2", "8.6.2.3", False),
        ("10.3.0", "10.3.0.30", True),
        ("8.6.1", "8.6.2", False),
    ],
)
def test_tensorrt_versions_compare_as_far_as_both_are_written(a, b, same) -> None:
    assert same_tensorrt_version(a, b) is same


def test_matching_sidecar_passes() -> None:
    info = EngineBuildInfo(Path("engine_build.json"), "8.6.2", "Orin", "8.7")
    assert build_mismatch(info, PLAN, "8.6.2.3", ORIN) is None


def test_sidecar_from_another_tensorrt_names_both_versions() -> None:
    info = EngineBuildInfo(Path("/models/lane/1/engine_build.json"), "8.5.2.2", "Orin", "8.7")
    assert build_mismatch(info, PLAN, "8.6.2.3", ORIN) == (
        "'/models/lane/1/model.plan' was built by TensorRT 8.5.2.2 (engine_build.json), but this "
        "is TensorRT 8.6.2.3; rebuild the engine on this device with 'edgebox build-engine'"
    )


def test_sidecar_from_another_device_names_both_devices() -> None:
    info = EngineBuildInfo(Path("engine_build.json"), "8.6.2.3", "NVIDIA GeForce RTX 3080", "8.6")
    assert build_mismatch(info, PLAN, "8.6.2.3", ORIN) == (
        "'/models/lane/1/model.plan' was built on 'NVIDIA GeForce RTX 3080' (compute capability "
        "8.6), but this is 'Orin' (compute capability 8.7); rebuild the engine on this device "
        "with 'edgebox build-engine'"
    )


def test_same_compute_capability_on_another_device_loads_with_a_note() -> None:
    info = EngineBuildInfo(Path("engine_build.json"), "8.6.2.3", "Orin NX", "8.7")
    assert build_mismatch(info, PLAN, "8.6.2.3", ORIN) is None
    assert device_name_note(info, ORIN) == (
        "engine built on 'Orin NX', running on 'Orin' (same compute capability 8.7); its "
        "kernels were timed on the other device"
    )


def test_library_version_error_becomes_a_reason_with_both_versions() -> None:
    messages = [
        "6: The engine plan file is not compatible with this version of TensorRT, expecting "
        "library version 8.6.2.3 got 8.5.2.2, please rebuild.",
        "4: [runtime.cpp::deserializeCudaEngine::66] Error Code 4: Internal Error "
        "(Engine deserialization failed.)",
    ]
    assert deserialize_failure(messages, PLAN, "8.6.2.3") == (
        "'/models/lane/1/model.plan' was serialized by TensorRT 8.5.2.2, but this is TensorRT "
        "8.6.2.3; rebuild the engine on this device (TensorRT: " + " | ".join(messages) + ")"
    )


def test_version_tag_error_names_this_tensorrt_version() -> None:
    messages = [
        "1: [stdArchiveReader.cpp::StdArchiveReader::42] Error Code 1: Serialization "
        "(Serialization assertion stdVersionRead == serializationVersion failed.Version tag "
        "does not match. Note: Current Version: 232, Serialized Engine Version: 213)"
    ]
    reason = deserialize_failure(messages, PLAN, "8.6.2.3")
    assert reason.startswith(
        "'/models/lane/1/model.plan' was serialized by another TensorRT version (serialization "
        "tag 213; this TensorRT 8.6.2.3 writes 232); rebuild the engine on this device "
        "(TensorRT: 1: [stdArchiveReader.cpp"
    )


def test_compute_capability_error_names_both() -> None:
    messages = [
        "6: The engine plan file is generated on an incompatible device, expecting compute 8.7 "
        "got compute 7.2, please rebuild."
    ]
    reason = deserialize_failure(messages, PLAN, "8.5.2.2")
    assert reason.startswith(
        "'/models/lane/1/model.plan' was built for compute capability 7.2, but this GPU has "
        "8.7; rebuild the engine on this device"
    )


def test_unrecognized_failure_still_names_tensorrt_and_its_messages() -> None:
    reason = deserialize_failure(
        ["3: getPluginCreator could not find plugin: YoloLayer"], PLAN, "10.3.0"
    )
    assert reason == (
        "TensorRT 10.3.0 cannot deserialize '/models/lane/1/model.plan' "
        "(TensorRT: 3: getPluginCreator could not find plugin: YoloLayer)"
    )


def test_failure_without_messages_says_so() -> None:
    assert deserialize_failure([], PLAN, "10.3.0") == (
        "TensorRT 10.3.0 cannot deserialize '/models/lane/1/model.plan' "
        "(TensorRT logged no error on this thread)"
    )


def test_dla_core_on_a_device_without_dla_is_refused_with_its_source() -> None:
    nano = DeviceInfo("Orin Nano", "8.7")
    assert dla_problem(0, 0, nano, "config.pbtxt: instance_group 'g'") == (
        "the engine is meant for DLA core 0 (config.pbtxt: instance_group 'g'), but 'Orin Nano' "
        "has no DLA cores (Orin Nano has none; AGX Orin and Orin NX have 2)"
    )


def test_dla_core_beyond_the_devices_cores_is_refused() -> None:
    assert dla_problem(2, 2, ORIN, "engine_build.json: dla_core") == (
        "the engine is meant for DLA core 2 (engine_build.json: dla_core), but 'Orin' has only "
        "2 DLA core(s) (0 to 1)"
    )


def test_existing_dla_core_or_none_passes() -> None:
    assert dla_problem(1, 2, ORIN, "x") is None
    assert dla_problem(None, 0, ORIN, "x") is None
