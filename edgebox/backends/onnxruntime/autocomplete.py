"""Triton's auto-complete for ONNX models, then a strict comparison of the
config with the model file: what the config leaves out comes from the
session's inputs and outputs, and what it says must match them (names,
datatypes, shapes, the batch dimension, the sequence batcher's controls and
state), or the model is UNAVAILABLE naming both files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2

from edgebox.backends import base
from edgebox.backends.sequence_io import SequenceTensor, sequence_inputs, state_outputs
from edgebox.errors import Unavailable

DEFAULT_MAX_BATCH_SIZE = 4
"""Triton's ``default-max-batch-size``: what auto-complete sets for a batchable model."""

_CONFIG_TYPE_BY_ORT = {
    "tensor(bool)": "TYPE_BOOL",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
    "tensor(bfloat16)": "TYPE_BF16",
}


def complete_and_check(context: base.ModelContext, session: Any, model_path: Path) -> None:
    """Fill ``context.config`` in place from ``session``'s inputs and
    outputs, then hold it to them; Unavailable at the first mismatch."""
    config = context.config
    config_path = context.model_dir / "config.pbtxt"
    model_inputs = {i.name: _model_tensor(i) for i in session.get_inputs()}
    model_outputs = {o.name: _model_tensor(o) for o in session.get_outputs()}

    if not config.input and not config.output and config.max_batch_size == 0:
        everything = list(model_inputs.values()) + list(model_outputs.values())
        if everything and all(shape and shape[0] == -1 for _, shape in everything):
            config.max_batch_size = DEFAULT_MAX_BATCH_SIZE
    batch = 1 if config.max_batch_size > 0 else 0
    sequence_names = {t.name for t in (*sequence_inputs(config), *state_outputs(config))}
    if not config.input:
        _fill(config.input, _without(model_inputs, sequence_names), batch)
    if not config.output:
        _fill(config.output, _without(model_outputs, sequence_names), batch)

    def mismatch(text: str) -> Unavailable:
        return Unavailable(f"{context.where}: {config_path} does not match {model_path}: {text}")

    for kind, declared, actual in (
        ("input", config.input, model_inputs),
        ("output", config.output, model_outputs),
    ):
        for tensor in declared:
            found = actual.get(tensor.name)
            if found is None:
                names = ", ".join(f"'{n}'" for n in actual) or "none"
                raise mismatch(f"{kind} '{tensor.name}' is not in the model (its {kind}s: {names})")
            model_type, model_shape = found
            config_type = model_config_pb2.DataType.Name(tensor.data_type)
            if config_type != model_type:
                raise mismatch(
                    f"{kind} '{tensor.name}': config says {config_type}, model has {model_type}"
                )
            dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
            config_shape = [-1] * batch + dims
            if batch and model_shape and model_shape[0] != -1:
                raise mismatch(
                    f"{kind} '{tensor.name}': max_batch_size {config.max_batch_size} needs a "
                    f"variable first dimension, but the model's shape is {model_shape}"
                )
            if not _shapes_compatible(config_shape, model_shape):
                raise mismatch(
                    f"{kind} '{tensor.name}': config shape {config_shape} "
                    f"(max_batch_size {config.max_batch_size}) vs model shape {model_shape}"
                )
    for tensor in sequence_inputs(config):
        _check_sequence_tensor(tensor, model_inputs, "input", batch, mismatch)
    for tensor in state_outputs(config):
        _check_sequence_tensor(tensor, model_outputs, "output", batch, mismatch)
    declared_inputs = {t.name for t in config.input} | {t.name for t in sequence_inputs(config)}
    missing = [n for n in model_inputs if n not in declared_inputs]
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        raise mismatch(f"the model needs input(s) {names}, which the config does not declare")


def _check_sequence_tensor(
    tensor: SequenceTensor,
    actual: dict[str, tuple[str, list[int]]],
    kind: str,
    batch: int,
    mismatch,
) -> None:
    """A control must be [1] past the batch dimension (Triton's onnxruntime
    backend), or, batched, just [batch]: the instance flattens what the
    scheduler sends. A state must fit state.dims, where -1 on either side
    matches anything."""
    found = actual.get(tensor.name)
    if found is None:
        names = ", ".join(f"'{n}'" for n in actual) or "none"
        raise mismatch(f"{tensor.origin} is not in the model (its {kind}s: {names})")
    model_type, model_shape = found
    if model_type != tensor.config_type:
        raise mismatch(f"{tensor.origin}: config says {tensor.config_type}, model has {model_type}")
    if batch and (not model_shape or model_shape[0] != -1):
        raise mismatch(
            f"{tensor.origin}: sequence batching with a max_batch_size needs a variable first "
            f"dimension, but the model's shape is {model_shape}"
        )
    rest = model_shape[batch:]
    if tensor.is_control:
        fits = rest in ([1], [-1]) or (batch == 1 and rest == [])
        expected = "[-1, 1] or [-1]" if batch else "[1]"
    else:
        fits = len(rest) == len(tensor.dims) and all(
            m == -1 or c == -1 or c == m for c, m in zip(tensor.dims, rest, strict=True)
        )
        expected = str([-1] * batch + list(tensor.dims))
    if not fits:
        raise mismatch(f"{tensor.origin}: model shape {model_shape}, expected {expected}")


def _without(tensors: dict[str, tuple[str, list[int]]], names: set[str]) -> dict:
    return {name: found for name, found in tensors.items() if name not in names}


def _fill(container, tensors: dict[str, tuple[str, list[int]]], batch: int) -> None:
    for name, (type_name, shape) in tensors.items():
        tensor = container.add()
        tensor.name = name
        tensor.data_type = model_config_pb2.DataType.Value(type_name)
        dims = shape[batch:] if batch else shape
        tensor.dims.extend(dims or [1])
        if not dims:
            tensor.reshape.SetInParent()


def _model_tensor(node) -> tuple[str, list[int]]:
    type_name = _CONFIG_TYPE_BY_ORT.get(node.type, f"unsupported {node.type}")
    shape = [d if isinstance(d, int) and d >= 0 else -1 for d in (node.shape or [])]
    return type_name, shape


def _shapes_compatible(config_shape: list[int], model_shape: list[int]) -> bool:
    if len(config_shape) != len(model_shape):
        return False
    return all(m == -1 or c == m for c, m in zip(config_shape, model_shape, strict=True))
