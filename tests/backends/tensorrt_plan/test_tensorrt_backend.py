"""The TensorRT backend driven through the backend contract on a fake Jetson
(``FakeTensorRTRuntime`` + ``FakePycudaDriver``): loading, auto-complete,
execution with real bytes through fake device memory, dynamic batches and
profiles, DLA cores, engines from other TensorRT versions or devices,
plugins, and which thread touches CUDA."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2

from edgebox.backends.base import InstanceSpec
from edgebox.backends.tensorrt.backend import Backend
from edgebox.errors import EdgeboxError, ErrorCode, InvalidArgument, Unavailable
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor
from fakes.fake_tensorrt_runtime import FakeEngineSpec, FakeTensor

SIDECAR = {
    "tensorrt_version": "8.6.2.3",
    "device_name": "Orin",
    "compute_capability": "8.7",
    "dla_core": None,
    "gpu_fallback": False,
    "precision": "fp16",
    "onnx_sha256": "00" * 32,
    "built_at": "2025-05-01T09:30:00Z",
    "edgebox_version": "0.4.0",
}
DLA_LAYERS = [
    "input to nvm",
    "{ForeignNode[conv1...relu9]}",
    "relu9 from nvm",
    "x copy finish",
    "Softmax_10",
]


def x_request(
    *rows: list[float], dtype=np.float32, outputs: list[str] | None = None
) -> InferRequest:
    data = np.array(rows, dtype=dtype)
    return InferRequest(
        "m",
        [Tensor("x", "FP16" if dtype == np.float16 else "FP32", data)],
        outputs=[RequestedOutput(n) for n in outputs or []],
    )


def only(results: list) -> InferResponse:
    assert len(results) == 1
    assert isinstance(results[0], InferResponse), results[0]
    return results[0]


def failure_of(jetson, name: str, *instances: InstanceSpec) -> str:
    with pytest.raises(Unavailable) as error:
        jetson.load(name, *instances)
    return str(error.value)


# -- without TensorRT, pycuda or a GPU ------------------------------------------


def test_without_tensorrt_the_model_is_unavailable_saying_so(jetson, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    jetson.write_model("m")
    with pytest.raises(Unavailable) as error:
        Backend().complete_config(jetson.context("m"))
    assert str(error.value).startswith("TensorRT is not installed (")
    assert str(error.value).endswith("on a Jetson it comes with JetPack (python3-libnvinfer)")


def test_without_pycuda_the_model_is_unavailable_saying_so(jetson, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", types.ModuleType("tensorrt"))
    monkeypatch.setitem(sys.modules, "pycuda", None)
    jetson.write_model("m")
    with pytest.raises(Unavailable) as error:
        Backend().complete_config(jetson.context("m"))
    assert str(error.value).startswith("pycuda is not installed (")
    assert "export PATH=/usr/local/cuda/bin:$PATH" in str(error.value)


def test_missing_model_file_is_reported_before_any_import(jetson, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    jetson.write_model("m")
    (jetson.root / "m" / "1" / "model.plan").unlink()
    with pytest.raises(
        Unavailable, match=r"model 'm' version 1: model file '.*model.plan' not found"
    ):
        Backend().complete_config(jetson.context("m"))


def test_without_a_gpu_the_model_is_unavailable(jetson) -> None:
    jetson.cuda.device_count = 0
    jetson.write_model("m")
    assert failure_of(jetson, "m") == "model 'm' version 1: no CUDA GPU is visible to this process"


def test_cpu_instances_are_refused_before_any_gpu_work(jetson) -> None:
    jetson.write_model("m", 'platform: "tensorrt_plan"\ninstance_group [ { kind: KIND_CPU } ]\n')
    expected = (
        "model 'm' version 1: TensorRT engines run on a GPU, but instance_group 'm_0' asks for "
        "KIND_CPU"
    )
    assert failure_of(jetson, "m", InstanceSpec("m_0_0", "CPU", 0)) == expected
    assert jetson.cuda.events == []
    with pytest.raises(Unavailable, match=expected):
        jetson.load("m", InstanceSpec("m_0_0", "CPU", 0), complete=False)


def test_auto_instances_without_a_gpu_say_no_gpu_was_found(jetson) -> None:
    jetson.write_model("m")
    assert failure_of(jetson, "m", InstanceSpec("m_0_0", "CPU", 0)) == (
        "model 'm' version 1: no GPU found on this machine (instance_group 'm_0' is KIND_AUTO), "
        "and TensorRT engines need one"
    )


# -- loading and running ---------------------------------------------------------


def test_engine_runs_with_the_config_completed_from_it(jetson) -> None:
    jetson.write_model("m")
    context, (instance,) = jetson.load("m")
    assert context.config.max_batch_size == 8
    response = only(instance.execute([x_request([1, 2, 3, 4])]))
    assert (response.model_name, response.model_version) == ("m", "1")
    assert [(t.name, t.datatype) for t in response.outputs] == [("y", "FP32")]
    np.testing.assert_array_equal(response.outputs[0].data, [[2, 4, 6, 8]])


def test_one_instance_deserializes_the_engine_once(jetson) -> None:
    jetson.write_model("m")
    jetson.load("m")
    assert len(jetson.trt.engines) == 1


def test_each_further_instance_has_its_own_engine_and_thread(jetson) -> None:
    jetson.write_model(
        "m", 'platform: "tensorrt_plan"\ninstance_group [ { count: 2 kind: KIND_GPU } ]\n'
    )
    _, instances = jetson.load(
        "m", InstanceSpec("m_0_0", "GPU", 0), InstanceSpec("m_0_1", "GPU", 0)
    )
    assert len(jetson.trt.engines) == 2
    assert {i.worker.name for i in instances} == {"m_1_m_0_0", "m_1_m_0_1"}
    for instance in instances:
        np.testing.assert_array_equal(
            only(instance.execute([x_request([1, 1, 1, 1])])).outputs[0].data, [[2, 2, 2, 2]]
        )


def test_cuda_is_only_touched_on_the_instances_own_thread(jetson) -> None:
    jetson.write_model("m")
    _, (instance,) = jetson.load("m")
    callers = [
        threading.Thread(target=instance.execute, args=([x_request([i] * 4)],)) for i in range(3)
    ]
    for caller in callers:
        caller.start()
        caller.join()
    instance.close()
    cuda_work = (
        "mem_alloc",
        "htod",
        "dtoh",
        "execute",
        "deserialize",
        "free",
        "push",
        "pop",
        "detach",
    )
    assert jetson.thread_names(*cuda_work) == {"cuda-m_1_m_0_0"}
    assert [e[1] for e in jetson.cuda.events if e[1] in ("push", "pop", "detach")] == [
        "push",
        "pop",
        "detach",
    ]


def test_close_frees_every_buffer_before_the_context_is_popped(jetson) -> None:
    jetson.write_model("m")
    _, (instance,) = jetson.load("m")
    instance.execute([x_request([1, 2, 3, 4])])
    jetson.close_all()
    assert jetson.cuda.memory == {}
    kinds = [e[1] for e in jetson.cuda.events]
    assert kinds.index("pop") > max(i for i, kind in enumerate(kinds) if kind == "free")


def test_unadopted_probe_is_closed_on_unload(jetson) -> None:
    jetson.write_model("m")
    context = jetson.context("m")
    jetson.backend.complete_config(context)
    assert jetson.cuda.retained == 1
    jetson.backend.unload(context)
    assert jetson.cuda.retained == 0


def test_dynamic_batch_runs_as_one_execution_and_is_split(jetson) -> None:
    jetson.write_model("m")
    _, (instance,) = jetson.load("m")
    first, second = x_request([1, 1, 1, 1]), x_request([2, 2, 2, 2], [3, 3, 3, 3])
    results = instance.execute([first, second])
    assert [len(r.outputs[0].data) for r in results] == [1, 2]
    np.testing.assert_array_equal(results[1].outputs[0].data, [[4, 4, 4, 4], [6, 6, 6, 6]])
    (context,) = jetson.trt.engines[0].contexts
    assert [e["shapes"] for e in context.executions] == [{"x": (3, 4)}]


def test_every_output_gets_a_buffer_but_only_the_asked_for_are_returned(jetson) -> None:
    spec = FakeEngineSpec(outputs=[FakeTensor("y"), FakeTensor("z", "INT32")])
    jetson.write_model("m", spec=spec)
    _, (instance,) = jetson.load("m")
    response = only(instance.execute([x_request([1, 2, 3, 4], outputs=["z"])]))
    assert [(t.name, t.datatype) for t in response.outputs] == [("z", "INT32")]
    np.testing.assert_array_equal(response.outputs[0].data, [[2, 4, 6, 8]])
    (context,) = jetson.trt.engines[0].contexts
    assert set(context.addresses) == {"x", "y", "z"}


def test_fp16_io_travels_as_fp16(jetson) -> None:
    spec = FakeEngineSpec(inputs=[FakeTensor("x", "HALF")], outputs=[FakeTensor("y", "HALF")])
    jetson.write_model("m", spec=spec)
    context, (instance,) = jetson.load("m")
    assert context.config.input[0].data_type == model_config_pb2.TYPE_FP16
    response = only(instance.execute([x_request([0.5, 1.5, 2.5, 3.5], dtype=np.float16)]))
    assert response.outputs[0].datatype == "FP16"
    assert response.outputs[0].data.dtype == np.float16
    np.testing.assert_array_equal(response.outputs[0].data, [[1, 3, 5, 7]])


def test_buffers_are_reused_and_grow_only_when_needed(jetson) -> None:
    spec = FakeEngineSpec(
        inputs=[FakeTensor("x", shape=(-1, 64))],
        outputs=[FakeTensor("y", shape=(-1, 64))],
        profiles=[{"x": ((1, 64), (1, 64), (8, 64))}],
    )
    jetson.write_model("m", spec=spec)
    _, (instance,) = jetson.load("m")

    def allocations() -> int:
        return sum(e[1] == "mem_alloc" for e in jetson.cuda.events)

    instance.execute([x_request([1] * 64)])
    first = allocations()
    instance.execute([x_request([2] * 64)])
    assert allocations() == first
    response = only(instance.execute([x_request(*[[3] * 64] * 8)]))
    np.testing.assert_array_equal(response.outputs[0].data, np.full((8, 64), 6))
    assert allocations() == first + 2


# -- optimization profiles -------------------------------------------------------

TWO_PROFILES = FakeEngineSpec(
    inputs=[FakeTensor("x", shape=(-1, -1))],
    outputs=[FakeTensor("y", shape=(-1, -1))],
    profiles=[{"x": ((1, 1), (1, 4), (4, 4))}, {"x": ((1, 5), (1, 16), (2, 64))}],
    compute=lambda feeds, outputs: {"y": feeds["x"] * 2},
)


def two_profile_model(jetson, profiles: str = '[ "0", "1" ]') -> None:
    jetson.write_model(
        "m",
        f"""
        platform: "tensorrt_plan"
        max_batch_size: 2
        input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        instance_group [ {{ kind: KIND_GPU profile: {profiles} }} ]
        """,
        spec=TWO_PROFILES,
    )


def test_the_profile_whose_range_fits_the_request_is_used(jetson) -> None:
    two_profile_model(jetson)
    _, (instance,) = jetson.load("m")
    only(instance.execute([x_request([1] * 4)]))
    only(instance.execute([x_request([1] * 32)]))
    only(instance.execute([x_request([1] * 40)]))
    only(instance.execute([x_request([1] * 3)]))
    (context,) = jetson.trt.engines[0].contexts
    assert [e["profile"] for e in context.executions] == [0, 1, 1, 0]
    assert [e[2] for e in jetson.cuda.events if e[1] == "set_profile"] == ["1", "0"]


def test_a_request_no_allowed_profile_takes_is_refused_with_the_ranges(jetson) -> None:
    two_profile_model(jetson, '[ "0" ]')
    _, (instance,) = jetson.load("m")
    (error,) = instance.execute([x_request([1] * 32)])
    assert isinstance(error, EdgeboxError)
    assert error.code is ErrorCode.INVALID_ARG
    assert str(error) == (
        "model 'm' version 1: no optimization profile of this instance accepts 'x' [1,32] "
        "(profile 0: 'x' [1,1]..[4,4])"
    )


def test_merged_batch_no_profile_takes_runs_request_by_request(jetson) -> None:
    two_profile_model(jetson)
    _, (instance,) = jetson.load("m")
    big = [x_request([1] * 40), x_request([2] * 40)]
    results = instance.execute(big)
    np.testing.assert_array_equal(results[1].outputs[0].data, [[4] * 40])
    (context,) = jetson.trt.engines[0].contexts
    assert [e["shapes"]["x"] for e in context.executions] == [(2, 40)]


# -- DLA -------------------------------------------------------------------------

DLA_CONFIG = """
platform: "tensorrt_plan"
instance_group [ { kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA device_id: 1 } ] } ]
"""


def test_dla_core_is_set_before_deserializing_and_placement_is_noted(jetson, caplog) -> None:
    jetson.write_model("m", DLA_CONFIG, spec=FakeEngineSpec(layers=DLA_LAYERS))
    caplog.set_level("INFO")
    context, (instance,) = jetson.load("m", InstanceSpec("m_0_0", "GPU", 0, (("KIND_NVDLA", 1),)))
    assert [e[2] for e in jetson.cuda.events if e[1] == "deserialize"] == ["DLA_core=1"]
    assert jetson.trt.engines[0].dla_core == 1
    note = "layer placement: DLA core 1: 1 layer; GPU fallback: 1 layer (Softmax_10)"
    assert context.notes == [note]
    assert f"model 'm' version 1: {note}" in caplog.text
    np.testing.assert_array_equal(
        only(instance.execute([x_request([1] * 4)])).outputs[0].data, [[2] * 4]
    )


def test_gpu_engine_notes_all_layers_on_the_gpu(jetson) -> None:
    jetson.write_model("m")
    context, _ = jetson.load("m")
    assert context.notes == ["layer placement: GPU: 2 layers"]


def test_dla_core_the_device_lacks_is_unavailable(orin_nano) -> None:
    orin_nano.write_model("m", DLA_CONFIG)
    config_path = orin_nano.root / "m" / "config.pbtxt"
    assert failure_of(orin_nano, "m", InstanceSpec("m_0_0", "GPU", 0, (("KIND_NVDLA", 1),))) == (
        f"model 'm' version 1: the engine is meant for DLA core 1 ({config_path}: instance_group "
        "'m_0' secondary_devices { kind: KIND_NVDLA device_id: 1 }), but 'Orin' has no DLA cores "
        "(Orin Nano has none; AGX Orin and Orin NX have 2)"
    )
    assert not [e for e in orin_nano.cuda.events if e[1] == "deserialize"]


def test_sidecar_dla_core_is_used_when_the_config_names_none(jetson) -> None:
    jetson.write_model(
        "m", spec=FakeEngineSpec(layers=DLA_LAYERS), sidecar={**SIDECAR, "dla_core": 0}
    )
    context, _ = jetson.load("m")
    assert [e[2] for e in jetson.cuda.events if e[1] == "deserialize"] == ["DLA_core=0"]
    assert context.notes == [
        "layer placement: DLA core 0: 1 layer; GPU fallback: 1 layer (Softmax_10)"
    ]


def test_dla_instance_for_a_gpu_built_engine_is_unavailable(jetson) -> None:
    jetson.write_model("m", DLA_CONFIG, sidecar=SIDECAR)
    reason = failure_of(jetson, "m", InstanceSpec("m_0_0", "GPU", 0, (("KIND_NVDLA", 1),)))
    assert reason.endswith(
        "asks for DLA core 1, but '"
        + str(jetson.root / "m/1/model.plan")
        + "' was built for the GPU ("
        + str(jetson.root / "m/1/engine_build.json")
        + " has dla_core null); rebuild it for the DLA or remove the secondary device"
    )


# -- engines from elsewhere ------------------------------------------------------


def test_engine_from_another_tensorrt_names_both_versions(jetson) -> None:
    jetson.write_model("m", spec=FakeEngineSpec(tensorrt_version="8.5.2.2"))
    plan = jetson.root / "m/1/model.plan"
    assert failure_of(jetson, "m") == (
        f"model 'm' version 1: '{plan}' was serialized by TensorRT 8.5.2.2, but this is TensorRT "
        "8.6.2.3; rebuild the engine on this device (TensorRT: 6: The engine plan file is not "
        "compatible with this version of TensorRT, expecting library version 8.6.2.3 got "
        "8.5.2.2, please rebuild.)"
    )
    assert jetson.cuda.retained == 0


def test_engine_for_another_device_names_both_compute_capabilities(jetson) -> None:
    jetson.write_model("m", spec=FakeEngineSpec(compute_capability="7.2"))
    reason = failure_of(jetson, "m")
    assert "was built for compute capability 7.2, but this GPU has 8.7" in reason


def test_file_that_is_no_engine_is_unavailable_with_tensorrts_words(jetson) -> None:
    jetson.write_model("m", plan=b"not really an engine")
    reason = failure_of(jetson, "m")
    assert (
        "was serialized by another TensorRT version (serialization tag 0; this TensorRT 8.6.2.3 writes 236)"
        in reason
    )
    assert "Version tag does not match" in reason


def test_sidecar_from_another_tensorrt_is_refused_before_deserializing(jetson) -> None:
    jetson.write_model("m", sidecar={**SIDECAR, "tensorrt_version": "8.5.2.2"})
    plan = jetson.root / "m/1/model.plan"
    assert failure_of(jetson, "m") == (
        f"model 'm' version 1: '{plan}' was built by TensorRT 8.5.2.2 (engine_build.json), but "
        "this is TensorRT 8.6.2.3; rebuild the engine on this device with 'edgebox build-engine'"
    )
    assert not [e for e in jetson.cuda.events if e[1] == "deserialize"]


def test_sidecar_from_another_device_names_both_devices(jetson) -> None:
    jetson.write_model(
        "m", sidecar={**SIDECAR, "device_name": "Xavier", "compute_capability": "7.2"}
    )
    assert (
        "was built on 'Xavier' (compute capability 7.2), but this is 'Orin' (compute capability 8.7)"
        in failure_of(jetson, "m")
    )


def test_sidecar_from_a_sibling_device_loads_with_a_note(jetson) -> None:
    jetson.write_model("m", sidecar={**SIDECAR, "device_name": "Orin NX"})
    context, _ = jetson.load("m")
    assert context.notes[1] == (
        "engine built on 'Orin NX', running on 'Orin' (same compute capability 8.7); its kernels "
        "were timed on the other device"
    )


def test_engine_with_io_edgebox_cannot_feed_is_unavailable(jetson) -> None:
    spec = FakeEngineSpec(
        inputs=[FakeTensor("x", format="CHW16"), FakeTensor("n", "INT32", (2,), location="HOST")],
        profiles=[{"x": ((1, 4), (1, 4), (2, 4))}],
    )
    jetson.write_model("m", spec=spec)
    reason = failure_of(jetson, "m")
    assert reason.endswith(
        "input 'x' uses the CHW16 I/O format; edgebox passes row-major (LINEAR) tensors, so "
        "rebuild without custom I/O formats; input 'n' is a shape tensor, which edgebox cannot feed"
    )


# -- plugins ---------------------------------------------------------------------


def test_plugin_library_loads_before_the_engine_that_needs_it(jetson) -> None:
    jetson.write_model(
        "m",
        'platform: "tensorrt_plan"\nmodel_operations { op_library_filename: "libyolo.so" }\n',
        spec=FakeEngineSpec(plugins=["YoloLayer_TRT"]),
    )
    library = jetson.root / "m" / "libyolo.so"
    library.write_bytes(b"\x7fELF")
    jetson.trt.plugin_libraries[str(library)] = ["YoloLayer_TRT"]
    jetson.load("m")
    order = [
        e[1]
        for e in jetson.cuda.events
        if e[1] in ("open_library", "init_libnvinfer_plugins", "deserialize")
    ]
    assert order == ["open_library", "init_libnvinfer_plugins", "deserialize"]


def test_missing_plugin_library_names_the_path_and_config_line(jetson) -> None:
    jetson.write_model(
        "m",
        'platform: "tensorrt_plan"\nparameters { key: "plugins" value { string_value: "libgone.so" } }\n',
    )
    model_dir = jetson.root / "m"
    assert failure_of(jetson, "m") == (
        f"model 'm' version 1: plugin library '{model_dir / 'libgone.so'}' not found "
        f"({model_dir / 'config.pbtxt'}:2: parameters 'plugins')"
    )


def test_plugin_library_outside_the_model_folder_is_never_opened(jetson) -> None:
    outside = jetson.root / "libevil.so"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_bytes(b"\x7fELF")
    jetson.trt.plugin_libraries[str(outside)] = ["Evil_TRT"]
    jetson.write_model(
        "m",
        'platform: "tensorrt_plan"\nmodel_operations { op_library_filename: "libevil.so" }\n',
    )
    (jetson.root / "m" / "libevil.so").symlink_to(outside)
    model_dir = jetson.root / "m"
    assert failure_of(jetson, "m") == (
        f"model 'm' version 1: {model_dir / 'config.pbtxt'}:2: "
        "model_operations.op_library_filename: plugin library 'libevil.so' is outside the model "
        "folder (a symlink leads out)"
    )
    assert not [e for e in jetson.cuda.events if e[1] == "open_library"]


def test_engine_file_outside_the_model_folder_is_never_read(jetson) -> None:
    model_dir = jetson.write_model("m")
    outside = jetson.root / "elsewhere.plan"
    (model_dir / "1" / "model.plan").rename(outside)
    (model_dir / "1" / "model.plan").symlink_to(outside)
    with pytest.raises(InvalidArgument) as error:
        jetson.load("m")
    assert str(error.value) == (
        "model 'm' version 1: default_model_filename 'model.plan' is outside the model folder "
        "(a symlink leads out)"
    )
    assert not [e for e in jetson.cuda.events if e[1] == "deserialize"]


def test_engine_needing_an_unloaded_plugin_says_which(jetson) -> None:
    jetson.write_model("m", spec=FakeEngineSpec(plugins=["YoloLayer_TRT"]))
    assert failure_of(jetson, "m").endswith(
        "(TensorRT: 3: getPluginCreator could not find plugin: YoloLayer_TRT)"
    )


def test_a_state_output_the_config_does_not_list_is_returned_when_asked_for(jetson) -> None:
    def accumulate(feeds, outputs):
        return {"y": feeds["x"] * 2, "OUTPUT_STATE": feeds["INPUT_STATE"] + feeds["x"][:, :1]}

    spec = FakeEngineSpec(
        inputs=[FakeTensor("x"), FakeTensor("INPUT_STATE", shape=(-1, 1))],
        outputs=[FakeTensor("y"), FakeTensor("OUTPUT_STATE", shape=(-1, 1))],
        profiles=[{"x": ((1, 4), (4, 4), (8, 4)), "INPUT_STATE": ((1, 1), (4, 1), (8, 1))}],
        compute=accumulate,
    )
    config = """
        platform: "tensorrt_plan"
        max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
        sequence_batching {
          state [ { input_name: "INPUT_STATE" output_name: "OUTPUT_STATE"
                    data_type: TYPE_FP32 dims: [ 1 ] } ]
        }
    """
    jetson.write_model("m", config=config, spec=spec)
    _, (instance,) = jetson.load("m")
    state = Tensor("INPUT_STATE", "FP32", np.array([[10]], dtype=np.float32))
    request = x_request([1, 2, 3, 4], outputs=["y", "OUTPUT_STATE"])
    request.inputs.append(state)
    response = only(instance.execute([request]))
    assert [(t.name, t.datatype) for t in response.outputs] == [
        ("y", "FP32"),
        ("OUTPUT_STATE", "FP32"),
    ]
    np.testing.assert_array_equal(response.output("OUTPUT_STATE").data, [[11]])
    plain = x_request([1, 2, 3, 4])
    plain.inputs.append(state)
    assert [t.name for t in only(instance.execute([plain])).outputs] == ["y"]
