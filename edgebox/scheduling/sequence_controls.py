"""The tensors the sequence batcher adds to each request a stateful model
runs: its control inputs (``sequence_batching.control_input``) and its
implicit state (``sequence_batching.state``); and the request each batch row
becomes with them (``row_request``), padding rows included.

Control values follow the config: ``int32_false_true``, ``fp32_false_true``
or ``bool_false_true`` give the datatype and the two values, ``CORRID`` its
``data_type``. Each request gets its own control tensors, shaped ``[1, 1]``
when the model batches and ``[1]`` when it does not, so a batch's requests
concatenate into the ``[batch, 1]`` tensors a batching backend runs.

Implicit state is kept by the scheduler, not the backend, so ONNX Runtime,
TensorRT and python models share one implementation: a sequence's first
request gets the state's initial value, every later one the output state its
predecessor returned. The config was validated when it was read
(``repository/sequence_batching_rules.py``); what is checked here is what only a request
can get wrong, its correlation ID against the CORRID datatype.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.scheduling.sequence_tag import (
    WARMUP_SEQUENCE,
    CorrelationId,
    SequenceTag,
    describe_id,
)
from edgebox.tensors import (
    InferRequest,
    InferResponse,
    RequestedOutput,
    Tensor,
    config_type_to_datatype,
    numpy_dtype,
)

_Control = model_config_pb2.ModelSequenceBatching.Control
_INTEGER_LIMITS = {
    "UINT64": (0, (1 << 64) - 1),
    "INT64": (0, (1 << 63) - 1),
    "UINT32": (0, (1 << 32) - 1),
    "INT32": (0, (1 << 31) - 1),
}


@dataclass(frozen=True, slots=True)
class _FlagControl:
    name: str
    kind: int
    datatype: str
    false_value: object
    true_value: object


@dataclass(frozen=True, slots=True)
class StateSpec:
    input_name: str
    output_name: str
    datatype: str
    initial: np.ndarray
    """The first request's input state: read-only, shared by every sequence."""


class SequenceControls:
    """Built once per loaded version and used by the batcher's workers from
    any thread: besides the config it holds only a cache of read-only flag
    tensors, which two threads may at worst build twice."""

    def __init__(
        self,
        flags: list[_FlagControl],
        corrid: tuple[str, str] | None,
        states: list[StateSpec],
        batched: bool,
        model_name: str,
    ) -> None:
        self._flags = flags
        self._corrid = corrid
        self.states = states
        self._batched = batched
        self._model_name = model_name
        self._state_outputs = [RequestedOutput(s.output_name) for s in states]
        self._flag_tensors: dict[tuple[bool, bool, bool], list[Tensor]] = {}

    @classmethod
    def from_config(cls, config, initial_states: Sequence[np.ndarray] = ()) -> SequenceControls:
        """``initial_states``: each ``state`` entry's first value, in config
        order (lifecycle reads them from the model folder,
        ``repository/initial_state.py``); required when the config has states."""
        batching = config.sequence_batching
        batched = config.max_batch_size > 0
        flags: list[_FlagControl] = []
        corrid = None
        for control_input in batching.control_input:
            for control in control_input.control:
                if control.kind == _Control.CONTROL_SEQUENCE_CORRID:
                    corrid = (
                        control_input.name,
                        config_type_to_datatype(model_config_pb2.DataType.Name(control.data_type)),
                    )
                    continue
                if control.int32_false_true:
                    datatype, values = "INT32", control.int32_false_true
                elif control.fp32_false_true:
                    datatype, values = "FP32", control.fp32_false_true
                else:
                    datatype, values = "BOOL", control.bool_false_true
                flags.append(
                    _FlagControl(control_input.name, control.kind, datatype, values[0], values[1])
                )
        if len(initial_states) != len(batching.state):
            raise ValueError(
                f"{len(batching.state)} state entries but {len(initial_states)} initial values"
            )
        states = [
            StateSpec(
                state.input_name,
                state.output_name,
                config_type_to_datatype(model_config_pb2.DataType.Name(state.data_type)),
                initial,
            )
            for state, initial in zip(batching.state, initial_states, strict=True)
        ]
        return cls(flags, corrid, states, batched, config.name)

    def check_id(self, correlation_id: CorrelationId) -> None:
        """InvalidArgument when the ID cannot be given as the model's CORRID:
        a string that is not a decimal number for an integer CORRID (Triton
        2.51 passes the string's bytes reinterpreted as the integer), or an
        integer out of the datatype's range."""
        if self._corrid is None or correlation_id is WARMUP_SEQUENCE:
            return
        name, datatype = self._corrid
        if datatype == "BYTES":
            return
        value = correlation_id
        if isinstance(value, str):
            if not (value.isascii() and value.isdigit()):
                raise InvalidArgument(
                    f"inference request for sequence {value} to model '{self._model_name}': "
                    f"the model's CORRID control input '{name}' is {datatype}, so a string "
                    "sequence_id must be a decimal number"
                )
            value = int(value)
        low, high = _INTEGER_LIMITS[datatype]
        if not low <= value <= high:
            raise InvalidArgument(
                f"inference request for sequence {correlation_id} to model "
                f"'{self._model_name}': the ID does not fit the model's CORRID control input "
                f"'{name}' ({datatype}, at most {high})"
            )

    def control_tensors(self, tag: SequenceTag | None) -> list[Tensor]:
        """One request's control inputs; ``tag`` None for the padding a direct
        batch puts in a slot with no request (READY false, ID 0). The flag
        tensors are built once per (ready, start, end) and shared, read-only:
        a backend never writes its inputs, and the hot path skips ``np.full``."""
        key = (tag is not None, tag is not None and tag.start, tag is not None and tag.end)
        tensors = self._flag_tensors.get(key)
        if tensors is None:
            tensors = self._flag_tensors[key] = [
                self._tensor(c.name, c.datatype, c.true_value if on else c.false_value)
                for c, on in ((c, _flag_on(c, *key)) for c in self._flags)
            ]
        if self._corrid is None:
            return list(tensors)
        name, datatype = self._corrid
        return [*tensors, self._tensor(name, datatype, _corrid_value(tag, datatype))]

    def row_request(
        self,
        request: InferRequest,
        tag: SequenceTag | None,
        state: Mapping[str, np.ndarray] | None,
        default_outputs: Iterable[str],
    ) -> InferRequest:
        """What the backend gets for one batch row: ``request`` (in model
        shapes) plus the controls and the input state, asking for the outputs
        the client wants (``default_outputs`` when it names none) and the
        state outputs. ``state`` is what the sequence's previous request
        returned; a START request takes the initial values. ``tag`` None makes
        a padding row from another row's request: zero inputs, the initial
        state, and no ID, parameters or cancellation of its own."""
        padding = tag is None
        inputs = list(request.inputs)
        if padding:
            inputs = [Tensor(t.name, t.datatype, _zeros_like(t.data)) for t in inputs]
        inputs += self.control_tensors(tag)
        for spec in self.states:
            value = spec.initial
            if state is not None and not (tag is not None and tag.start):
                value = state.get(spec.input_name, spec.initial)
            inputs.append(Tensor(spec.input_name, spec.datatype, value))
        asked = request.outputs or [RequestedOutput(n) for n in default_outputs]
        names = {o.name for o in asked}
        outputs = list(asked) + [o for o in self._state_outputs if o.name not in names]
        return InferRequest(
            model_name=request.model_name,
            inputs=inputs,
            model_version=request.model_version,
            id="" if padding else request.id,
            outputs=outputs,
            parameters={} if padding else request.parameters,
            is_cancelled=None if padding else request.is_cancelled,
        )

    def keep_state(
        self,
        state: dict[str, np.ndarray],
        response: InferResponse,
        correlation_id: CorrelationId,
        where: str,
    ) -> None:
        """Take the output state ``response`` returned into ``state``, for the
        sequence's next request. EdgeboxError when the model left one out."""
        for spec in self.states:
            tensor = response.output(spec.output_name)
            if tensor is None:
                raise EdgeboxError(
                    f"{where}: the model did not return output state "
                    f"'{spec.output_name}' for sequence {describe_id(correlation_id)}"
                )
            state[spec.input_name] = tensor.data

    def _tensor(self, name: str, datatype: str, value) -> Tensor:
        shape = (1, 1) if self._batched else (1,)
        data = np.full(shape, value, dtype=numpy_dtype(datatype))
        data.flags.writeable = False
        return Tensor(name, datatype, data)


def _flag_on(control: _FlagControl, ready: bool, start: bool, end: bool) -> bool:
    if control.kind == _Control.CONTROL_SEQUENCE_READY:
        return ready
    if control.kind == _Control.CONTROL_SEQUENCE_START:
        return start
    return end


def _corrid_value(tag: SequenceTag | None, datatype: str):
    correlation_id = 0 if tag is None or tag.id is WARMUP_SEQUENCE else tag.id
    if datatype == "BYTES":
        return str(correlation_id).encode("utf-8") if correlation_id != 0 else b""
    return int(correlation_id)


def _zeros_like(data: np.ndarray) -> np.ndarray:
    if data.dtype == np.object_:
        return np.full(data.shape, b"", dtype=object)
    return np.zeros_like(data)
