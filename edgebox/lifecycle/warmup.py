"""``model_warmup``: requests a version runs before it takes traffic, as Triton
does, so the first client request does not pay for lazy initialisation (memory
arenas, CUDA kernels, TensorRT tactic caches).

Warm-up requests go through the version's own scheduler, validated like a
client's. A warm-up that fails makes the version UNAVAILABLE with the reason;
what served before keeps serving. Warm-up is bounded (``max_warmup_requests``
in all, refused before any runs) and cancellable between requests, so neither
a huge ``count`` nor a slow model can hold up an unload or shutdown.
Statistics start from zero afterwards, so warm-up runs are not counted as
inferences.
Spec: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#model-warmup
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.errors import EdgeboxError, InvalidArgument, Unavailable
from edgebox.lifecycle.limits import warmup_request_count
from edgebox.repository.contained_path import WARMUP_FOLDER_LABEL, resolve_inside
from edgebox.repository.tensor_file import read_tensor_file, zeros
from edgebox.scheduling.scheduler import Scheduler
from edgebox.scheduling.sequence_tag import WARMUP_SEQUENCE
from edgebox.scheduling.statistics import ModelStatistics
from edgebox.signature import ModelSignature
from edgebox.tensors import (
    InferRequest,
    Tensor,
    config_type_to_datatype,
    numpy_dtype,
)

WARMUP_FOLDER = "warmup"
"""Where ``input_data_file`` files live, inside the model folder."""


def run_warmup(
    scheduler: Scheduler,
    config,
    signature: ModelSignature,
    model_dir: Path,
    where: str,
    max_requests: int | None = None,
    cancelled: Callable[[], str] = lambda: "",
) -> int:
    """Run every warm-up entry ``count`` times on the loading thread; returns
    how many requests ran.

    More than ``max_requests`` in all is refused before any runs. Before each
    request ``cancelled()`` is asked: a reason (an unload of the model, the
    server shutting down) stops the warm-up there with Unavailable, so a long
    warm-up never holds up either; the request already running finishes.
    """
    total = warmup_request_count(config)
    if max_requests is not None and total > max_requests:
        raise InvalidArgument(
            f"{where}: model_warmup asks for {total} requests in all (the sum of every "
            f"entry's count), more than the {max_requests} allowed (setting 'max_warmup_requests')"
        )
    runs = 0
    for warmup in config.model_warmup:
        label = f"{where}: warmup '{warmup.name}'"
        try:
            request = _request(warmup, config, signature, model_dir, label)
            signature.check_request(request, label)
        except EdgeboxError as exc:
            raise _failed(label, exc) from None
        for _ in range(max(warmup.count, 1)):
            reason = cancelled()
            if reason:
                raise Unavailable(f"{label} stopped after {runs} of {total} requests: {reason}")
            try:
                scheduler.infer(request)
            except EdgeboxError as exc:
                raise _failed(label, exc) from None
            runs += 1
    scheduler.statistics = ModelStatistics()
    return runs


def _failed(label: str, exc: EdgeboxError) -> Unavailable:
    message = str(exc)
    return Unavailable(message if message.startswith(label) else f"{label} failed: {message}")


def _request(
    warmup, config, signature: ModelSignature, model_dir: Path, label: str
) -> InferRequest:
    batched = signature.max_batch_size > 0
    if batched and warmup.batch_size > signature.max_batch_size:
        raise Unavailable(
            f"{label}: batch_size {warmup.batch_size} exceeds max_batch_size "
            f"{signature.max_batch_size}"
        )
    rng = np.random.default_rng(0)
    inputs = []
    for name, entry in warmup.inputs.items():
        datatype = config_type_to_datatype(model_config_pb2.DataType.Name(entry.data_type))
        shape = ([max(warmup.batch_size, 1)] if batched else []) + list(entry.dims)
        kind = entry.WhichOneof("input_data_type")
        if kind == "input_data_file":
            data = _from_file(
                model_dir / WARMUP_FOLDER, entry.input_data_file, datatype, shape, label, name
            )
        elif kind == "random_data":
            data = _random(rng, datatype, shape)
        else:
            data = zeros(datatype, shape)
        inputs.append(Tensor(name, datatype, data))
    # A stateful model's warm-up request is a sequence of its own, no client's.
    parameters = (
        {"sequence_id": WARMUP_SEQUENCE, "sequence_start": True, "sequence_end": True}
        if config.HasField("sequence_batching")
        else {}
    )
    return InferRequest(config.name, inputs, id=f"warmup:{warmup.name}", parameters=parameters)


def _random(rng: np.random.Generator, datatype: str, shape: list[int]) -> np.ndarray:
    if datatype == "BYTES":
        data = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            data[index] = rng.bytes(8)
        return data
    dtype = numpy_dtype(datatype)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if datatype == "BF16":
        values = rng.random(size=shape, dtype=np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    if dtype.kind == "f":
        return rng.random(size=shape).astype(dtype)
    return rng.integers(0, 100, size=shape).astype(dtype)


def _from_file(
    folder: Path, filename: str, datatype: str, shape: list[int], label: str, name: str
) -> np.ndarray:
    """A tensor read from ``<model>/warmup/<filename>``, which must stay inside
    that folder after symlinks and be a regular file of exactly the size the
    shape needs (for BYTES, at most ``tensor_file.MAX_BYTES_FILE``). The size is checked
    before anything is read, so neither ``/dev/zero`` nor a huge file is read."""
    where = f"{label}, input '{name}'"
    path = resolve_inside(
        folder, filename, "input_data_file", where, folder_label=WARMUP_FOLDER_LABEL
    )
    return read_tensor_file(path, datatype, shape, where)
