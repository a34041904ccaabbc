"""One ONNX Runtime session as the scheduler sees it.

A dynamic batch runs as one session call (``stacked_batch``). BYTES tensors
cross as ONNX Runtime's Python API wants them, inputs as ``str`` objects and
outputs back as ``bytes``; BF16 cannot cross at all and is refused per request.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.backends import base
from edgebox.backends.sequence_io import sequence_inputs, state_outputs
from edgebox.backends.stacked_batch import split_rows, stack_inputs, stackable
from edgebox.errors import EdgeboxError, InvalidArgument, one_line
from edgebox.tensors import (
    InferRequest,
    InferResponse,
    RequestedOutput,
    Tensor,
    config_type_to_datatype,
)


class OnnxInstance:
    """One ONNX Runtime session. ``InferenceSession.run`` releases the GIL, so
    instances of different models run in parallel on the CPU cores."""

    def __init__(self, context: base.ModelContext, session) -> None:
        self._session = session
        self._model_name = context.name
        self._version = str(context.version)
        self._where = context.where
        config = context.config
        self._output_names = [o.name for o in config.output]
        self._datatypes = {
            o.name: config_type_to_datatype(model_config_pb2.DataType.Name(o.data_type))
            for o in config.output
        }
        for state in state_outputs(config):
            self._datatypes.setdefault(state.name, config_type_to_datatype(state.config_type))
        self._string_inputs = {
            i.name for i in config.input if i.data_type == model_config_pb2.TYPE_STRING
        } | {t.name for t in sequence_inputs(config) if t.config_type == "TYPE_STRING"}
        model_ranks = {i.name: len(i.shape or []) for i in session.get_inputs()}
        self._flattened_controls = {
            t.name for t in sequence_inputs(config) if t.is_control and model_ranks.get(t.name) == 1
        }
        """Controls of a batching model whose model shape is [batch] rather than
        [batch, 1]: the scheduler sends [batch, 1], flattened before the run."""

    def execute(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        """One request runs as it is; several (a dynamic batch, all with the same
        shapes apart from the batch dimension) run as one session call on their
        inputs concatenated, and each gets its rows of the outputs as views."""
        if len(requests) == 1 or not stackable(requests):
            return [self._run(request) for request in requests]
        return self._run_batch(requests)

    def _run_batch(self, requests: Sequence[InferRequest]) -> list[InferResponse | EdgeboxError]:
        first = requests[0]
        stacked = stack_inputs(requests)
        inputs = [Tensor(t.name, t.datatype, stacked[t.name]) for t in first.inputs]
        wanted: set[str] = set()
        for request in requests:
            wanted.update([o.name for o in request.outputs] or self._output_names)
        outputs = [RequestedOutput(n) for n in self._datatypes if n in wanted]
        merged = self._run(InferRequest(first.model_name, inputs, outputs=outputs))
        if isinstance(merged, EdgeboxError):
            return [merged] * len(requests)
        try:
            rows = split_rows(self._where, {t.name: t.data for t in merged.outputs}, requests)
        except EdgeboxError as error:
            return [error] * len(requests)
        return [
            InferResponse(
                self._model_name,
                self._version,
                [Tensor(t.name, t.datatype, own[t.name]) for t in merged.outputs],
                id=request.id,
            )
            for request, own in zip(requests, rows, strict=True)
        ]

    def _run(self, request: InferRequest) -> InferResponse | EdgeboxError:
        feeds = {}
        for tensor in request.inputs:
            if tensor.datatype == "BF16":
                return InvalidArgument(
                    f"{self._where}, input '{tensor.name}': BF16 tensors cannot be passed to "
                    "ONNX Runtime's Python API"
                )
            data = tensor.data
            if tensor.name in self._string_inputs:
                data = np.vectorize(_as_text, otypes=[object])(data) if data.size else data
            if tensor.name in self._flattened_controls and data.ndim == 2:
                data = data.reshape(-1)
            feeds[tensor.name] = data
        names = [o.name for o in request.outputs] or self._output_names
        try:
            results = self._session.run(names, feeds)
        except Exception as exc:
            return EdgeboxError(f"{self._where}: ONNX Runtime failed: {one_line(exc)}")
        outputs = []
        for name, array in zip(names, results, strict=True):
            datatype = self._datatypes[name]
            if datatype == "BYTES":
                array = (
                    np.vectorize(_as_bytes, otypes=[object])(array)
                    if array.size
                    else array.astype(object)
                )
            outputs.append(Tensor(name, datatype, array))
        return InferResponse(self._model_name, self._version, outputs, id=request.id)

    def close(self) -> None:
        self._session = None


def _as_text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _as_bytes(value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")
