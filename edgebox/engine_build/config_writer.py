"""``config.pbtxt`` for a freshly built engine, and the check that an existing
one still fits the engine.

The text is produced from tritonclient's ``ModelConfig`` message with
protobuf's text format, the same schema ``repository/config.py`` parses, so
what is written is exactly what edgebox (and Triton) will read back.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md
"""

from __future__ import annotations

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from edgebox.engine_build.network_io import NetworkIO, TensorSpec
from edgebox.repository.config import ModelConfig, backend_of
from edgebox.tensors import datatype_to_config_type

PLATFORM = "tensorrt_plan"


def engine_model_config(
    model: str, io: NetworkIO, max_batch_size: int, dla_core: int | None
) -> ModelConfig:
    """Inputs and outputs as the engine has them. With batching, dims leave
    out the batch dimension (Triton adds it back). A DLA engine's instances
    name their core the way Triton does: a GPU instance with a KIND_NVDLA
    secondary device."""
    config = ModelConfig(name=model, platform=PLATFORM, max_batch_size=max_batch_size)
    for spec in io.inputs:
        _add_tensor(config.input.add(), spec, max_batch_size)
    for spec in io.outputs:
        _add_tensor(config.output.add(), spec, max_batch_size)
    if dla_core is not None:
        group = config.instance_group.add()
        group.count = 1
        group.kind = model_config_pb2.ModelInstanceGroup.KIND_GPU
        device = group.secondary_devices.add()
        device.kind = model_config_pb2.ModelInstanceGroup.SecondaryDevice.KIND_NVDLA
        device.device_id = dla_core
    return config


def model_config_text(config: ModelConfig, source: str) -> str:
    """The file's text, with a comment saying where it came from, so a reader
    of the repository knows it was generated and may be edited.

    Two touches make it read like Triton's examples without changing what it
    parses to: ``dims`` on one line, and fields that hold their default value
    (``kind: KIND_NVDLA``, ``device_id: 0``), which text format leaves out,
    written out in the instance groups.
    """
    header = (
        f"# Written by 'edgebox build-engine' from {source}: inputs, outputs and\n"
        "# max_batch_size come from the TensorRT engine and its optimization profile.\n"
    )
    body = ModelConfig()
    body.CopyFrom(config)
    body.ClearField("instance_group")
    return header + _one_line_dims(text_format.MessageToString(body)) + _groups_text(config)


def _one_line_dims(text: str) -> str:
    lines: list[str] = []
    for line in text.splitlines():
        indent, _, value = line.partition("dims: ")
        if value and not indent.strip():
            if lines and lines[-1].startswith(f"{indent}dims: ["):
                lines[-1] = lines[-1][: -len(" ]")] + f", {value} ]"
            else:
                lines.append(f"{indent}dims: [ {value} ]")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _groups_text(config: ModelConfig) -> str:
    kinds = model_config_pb2.ModelInstanceGroup.Kind
    device_kinds = model_config_pb2.ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind
    text = ""
    for group in config.instance_group:
        devices = ", ".join(
            f"{{ kind: {device_kinds.Name(d.kind)} device_id: {d.device_id} }}"
            for d in group.secondary_devices
        )
        text += (
            "instance_group {\n"
            f"  count: {group.count}\n"
            f"  kind: {kinds.Name(group.kind)}\n"
            + (f"  secondary_devices [ {devices} ]\n" if devices else "")
            + "}\n"
        )
    return text


def config_mismatches(
    config: ModelConfig, io: NetworkIO, max_batch_size: int, dla_core: int | None
) -> list[str]:
    """Why an existing config cannot serve this engine: another backend, other
    input or output names, a larger batch than the profile allows, or DLA
    instances for a GPU engine (the TensorRT backend refuses that pairing at
    load). Empty when it fits. Dims are left to the daemon's load-time check."""
    problems = []
    backend = backend_of(config)
    if backend != "tensorrt":
        platform = config.platform or config.backend
        problems.append(
            f"it is a '{platform}' model; a TensorRT engine needs platform '{PLATFORM}' "
            "(build into a new model name instead, e.g. --model NAME_trt)"
        )
    for kind, configured, engine in (
        ("inputs", config.input, io.inputs),
        ("outputs", config.output, io.outputs),
    ):
        expected = sorted(spec.name for spec in engine)
        got = sorted(tensor.name for tensor in configured)
        if configured and got != expected:
            problems.append(
                f"{kind}: the engine has {_names(expected)}, the config has {_names(got)}"
            )
    if dla_core is None:
        nvdla = model_config_pb2.ModelInstanceGroup.SecondaryDevice.KIND_NVDLA
        cores = sorted(
            {
                d.device_id
                for g in config.instance_group
                for d in g.secondary_devices
                if d.kind == nvdla
            }
        )
        if cores:
            problems.append(
                f"its instance_group runs instances on DLA core {cores[0]} (KIND_NVDLA), but this "
                f"engine is built for the GPU; add --dla-core {cores[0]} or edit instance_group"
            )
    if config.max_batch_size > max_batch_size:
        if max_batch_size == 0:
            engine_batch = "the engine does not batch (its profile does not start the batch at 1)"
        else:
            engine_batch = f"the engine's profile allows at most {max_batch_size}"
        problems.append(
            f"max_batch_size {config.max_batch_size}: {engine_batch}; "
            "raise the batch in --max-shapes"
        )
    return problems


def _add_tensor(tensor, spec: TensorSpec, max_batch_size: int) -> None:
    tensor.name = spec.name
    tensor.data_type = model_config_pb2.DataType.Value(datatype_to_config_type(spec.datatype))
    tensor.dims.extend(spec.shape[1:] if max_batch_size > 0 else spec.shape)


def _names(names: list[str]) -> str:
    return ", ".join(f"'{name}'" for name in names) or "none"
