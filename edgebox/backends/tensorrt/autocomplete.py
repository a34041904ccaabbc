"""Triton's auto-complete for TensorRT engines, then a strict comparison of the
config with the engine.

Filled from the engine when the config leaves them out: inputs and outputs
(name, datatype, dims), ``max_batch_size`` (the largest batch the allowed
profiles take), and, as Triton does for TensorRT, ``dynamic_batching {}`` when
the model batches more than 1 and the config names no scheduler. A config that
says something the engine contradicts is refused with a reason naming both
config.pbtxt and the engine file.
Spec: https://github.com/triton-inference-server/tensorrt_backend (src/model_state.cc)
"""

from __future__ import annotations

import logging
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from edgebox.backends import base
from edgebox.backends.sequence_io import SequenceTensor, sequence_inputs, state_outputs
from edgebox.backends.tensorrt.engine_io import EngineIO, EngineTensor
from edgebox.backends.tensorrt.profiles import (
    ProfileNameError,
    allowed_profiles,
    max_batch_size,
)
from edgebox.errors import Unavailable

log = logging.getLogger(__name__)


def complete_and_check(context: base.ModelContext, io: EngineIO, model_path: Path) -> None:
    config = context.config
    config_path = context.model_dir / "config.pbtxt"

    def mismatch(text: str) -> Unavailable:
        return Unavailable(f"{context.where}: {config_path} does not match {model_path}: {text}")

    allowed: list[int] = []
    for group in config.instance_group:
        try:
            indices = allowed_profiles(list(group.profile), len(io.profiles))
        except ProfileNameError as exc:
            raise mismatch(f"instance_group '{group.name}': {exc}") from None
        allowed += [i for i in indices if i not in allowed]
    allowed = allowed or [0]
    engine_max = max_batch_size(io.profiles, allowed)
    everything = (*io.inputs, *io.outputs)

    if not config.input and not config.output:
        if config.max_batch_size == 0 and _batchable(everything, engine_max):
            config.max_batch_size = engine_max
    elif config.max_batch_size == 0 and _config_hints_batching(config, io):
        if engine_max == 0:
            raise mismatch(
                "the config's dims leave out a batch dimension, but the engine has none to batch"
            )
        config.max_batch_size = engine_max
    if config.max_batch_size > engine_max:
        allowed_text = ", ".join(str(i) for i in allowed)
        raise mismatch(
            f"max_batch_size {config.max_batch_size}, but the engine's profile(s) {allowed_text} "
            f"take a batch of at most {engine_max}"
        )
    batch = 1 if config.max_batch_size > 0 else 0

    sequence_names = {t.name for t in (*sequence_inputs(config), *state_outputs(config))}
    _fill(config.input, tuple(t for t in io.inputs if t.name not in sequence_names), batch)
    _fill(config.output, tuple(t for t in io.outputs if t.name not in sequence_names), batch)

    for kind, declared, actual in (
        ("input", config.input, io.inputs),
        ("output", config.output, io.outputs),
    ):
        by_name = {t.name: t for t in actual}
        for tensor in declared:
            found = by_name.get(tensor.name)
            if found is None:
                names = ", ".join(f"'{n}'" for n in by_name) or "none"
                raise mismatch(
                    f"{kind} '{tensor.name}' is not in the engine (its {kind}s: {names})"
                )
            config_type = model_config_pb2.DataType.Name(tensor.data_type)
            if config_type != found.config_type:
                raise mismatch(
                    f"{kind} '{tensor.name}': config says {config_type}, engine has "
                    f"{found.config_type or found.tensorrt_type}"
                )
            dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
            problem = _shape_problem(dims, found, config.max_batch_size)
            if problem:
                raise mismatch(f"{kind} '{tensor.name}': {problem}")
            if found.is_input and not any(
                _fits_apart_from_batch(p.ranges[found.name], dims, batch)
                for p in io.profiles
                if p.index in allowed
            ):
                ranges = "; ".join(
                    f"profile {p.index}: {p.ranges[found.name].describe()}"
                    for p in io.profiles
                    if p.index in allowed
                )
                raise mismatch(
                    f"input '{tensor.name}': config dims {dims} are outside every allowed "
                    f"optimization profile ({ranges})"
                )
    for kind, tensors, actual in (
        ("input", sequence_inputs(config), io.inputs),
        ("output", state_outputs(config), io.outputs),
    ):
        for tensor in tensors:
            problem = _sequence_problem(tensor, kind, actual, config.max_batch_size)
            if problem:
                raise mismatch(problem)
    declared_inputs = {t.name for t in config.input} | {t.name for t in sequence_inputs(config)}
    missing = [t.name for t in io.inputs if t.name not in declared_inputs]
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        raise mismatch(f"the engine needs input(s) {names}, which the config does not declare")

    if (
        config.max_batch_size > 1
        and not config.HasField("dynamic_batching")
        and not config.HasField("sequence_batching")
    ):
        config.dynamic_batching.SetInParent()
        log.info(
            "%s: max_batch_size %d and no scheduler in the config: dynamic batching on, as "
            "Triton does for TensorRT",
            context.where,
            config.max_batch_size,
        )


def _sequence_problem(
    tensor: SequenceTensor, kind: str, actual: tuple[EngineTensor, ...], config_batch: int
) -> str | None:
    """A control or state tensor the sequence batcher feeds (or reads back)
    checked as a declared one: present, same datatype, and a shape that takes
    [1] (a control, as Triton's TensorRT backend requires) or state.dims past
    the batch dimension."""
    by_name = {t.name: t for t in actual}
    found = by_name.get(tensor.name)
    if found is None:
        names = ", ".join(f"'{n}'" for n in by_name) or "none"
        return f"{tensor.origin} is not in the engine (its {kind}s: {names})"
    if found.config_type != tensor.config_type:
        return (
            f"{tensor.origin}: config says {tensor.config_type}, engine has "
            f"{found.config_type or found.tensorrt_type}"
        )
    problem = _shape_problem(list(tensor.dims), found, config_batch)
    return f"{tensor.origin}: {problem}" if problem else None


def _batchable(tensors: tuple[EngineTensor, ...], engine_max: int) -> bool:
    """Every tensor leads with a dimension that can be the batch: dynamic, or
    fixed at 1 (an engine built for batch 1 serves max_batch_size 1)."""
    return engine_max > 0 and all(t.shape and t.shape[0] in (-1, 1) for t in tensors)


def _config_hints_batching(config, io: EngineIO) -> bool:
    """Triton's hint: a declared tensor with one dimension fewer than the engine's."""
    for declared in (*config.input, *config.output):
        found = io.tensor(declared.name)
        dims = declared.reshape.shape if declared.HasField("reshape") else declared.dims
        if found is not None and len(dims) and len(found.shape) == len(dims) + 1:
            return True
    return False


def _shape_problem(dims: list[int], found: EngineTensor, config_batch: int) -> str | None:
    engine = list(found.shape)
    batch = 1 if config_batch > 0 else 0
    if batch:
        if not engine:
            return (
                f"max_batch_size {config_batch} needs a batch dimension, but the engine's "
                "shape is []"
            )
        first = engine[0]
        if first != -1 and not (first == 1 and config_batch == 1):
            return (
                f"max_batch_size {config_batch} needs a variable first dimension, but the "
                f"engine's shape is {engine}"
            )
    config_shape = [-1] * batch + dims
    if len(config_shape) != len(engine) or not all(
        e == -1 or c == e for c, e in zip(config_shape[batch:], engine[batch:], strict=True)
    ):
        return (
            f"config shape {config_shape} (max_batch_size {config_batch}) vs engine shape {engine}"
        )
    return None


def _fits_apart_from_batch(shape_range, dims: list[int], batch: int) -> bool:
    """The config's (non-batch) dims lie in the range; -1 dims are the client's
    choice and checked per request."""
    low, high = shape_range.min[batch:], shape_range.max[batch:]
    if len(low) != len(dims):
        return False
    return all(d == -1 or lo <= d <= hi for d, lo, hi in zip(dims, low, high, strict=True))


def _fill(container, tensors: tuple[EngineTensor, ...], batch: int) -> None:
    """Add the engine's tensors when the config lists none (config rules make
    every listed tensor complete, so there is nothing to fill in them)."""
    if len(container):
        return
    for found in tensors:
        tensor = container.add()
        tensor.name = found.name
        if found.config_type:
            tensor.data_type = model_config_pb2.DataType.Value(found.config_type)
        dims = list(found.shape[batch:])
        tensor.dims.extend(dims or [1])
        if not dims:
            tensor.reshape.SetInParent()
