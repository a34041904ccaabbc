"""What a model accepts and returns, as clients see it, derived from its config.

``max_batch_size > 0`` adds a leading variable batch dimension to every tensor
(``[-1] + dims``); ``0`` means the dims are the full shape. ``-1`` is a variable
dimension. ``reshape`` changes the shape the backend sees without the client
knowing: backends always get model shapes, clients always see config shapes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox.errors import InvalidArgument
from edgebox.tensors import InferRequest, InferResponse, Tensor, config_type_to_datatype


@dataclass(frozen=True, slots=True)
class TensorSpec:
    name: str
    datatype: str
    shape: tuple[int, ...]
    """Full shape as clients send it; the batch dim, if any, is -1."""
    model_shape: tuple[int, ...] | None
    """Shape the backend sees after ``reshape`` (batch dim included), or None."""
    optional: bool = False

    def accepts(self, shape: tuple[int, ...]) -> bool:
        if len(shape) != len(self.shape):
            return False
        return all(want == -1 or want == got for want, got in zip(self.shape, shape, strict=True))


@dataclass(frozen=True, slots=True)
class ModelSignature:
    name: str
    max_batch_size: int
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    _passed_through: set[str] = field(default_factory=set, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def first_passthrough(self, output: str) -> bool:
        """True the first time ``output`` came back in another datatype than
        the config's: one signature per loaded version, so the caller warns
        once per version, not per request. Any scheduler thread may call."""
        with self._lock:
            if output in self._passed_through:
                return False
            self._passed_through.add(output)
            return True

    @classmethod
    def from_config(cls, config) -> ModelSignature:
        batched = config.max_batch_size > 0

        def spec(tensor, optional: bool) -> TensorSpec:
            prefix = (-1,) if batched else ()
            model_shape = None
            if tensor.HasField("reshape"):
                model_shape = prefix + tuple(tensor.reshape.shape)
            return TensorSpec(
                name=tensor.name,
                datatype=config_type_to_datatype(_type_name(tensor.data_type)),
                shape=prefix + tuple(tensor.dims),
                model_shape=model_shape,
                optional=optional,
            )

        return cls(
            name=config.name,
            max_batch_size=config.max_batch_size,
            inputs={t.name: spec(t, t.optional) for t in config.input},
            outputs={t.name: spec(t, False) for t in config.output},
        )

    def check_request(self, request: InferRequest, where: str) -> None:
        """Raise InvalidArgument naming the first input that does not fit.

        An input given twice is refused, as Triton refuses it ("input 'X'
        already exists in request"): backends would each pick a different one.
        An output requested twice is refused too, where Triton keeps the first
        silently: the two may ask for different ``binary_data`` or
        ``classification``, and which one the client meant cannot be known."""
        batch_size = None
        given: set[str] = set()
        for tensor in request.inputs:
            if tensor.name in given:
                raise InvalidArgument(f"{where}: input '{tensor.name}' already exists in request")
            given.add(tensor.name)
            spec = self.inputs.get(tensor.name)
            if spec is None:
                expected = ", ".join(f"'{n}'" for n in self.inputs) or "none"
                raise InvalidArgument(
                    f"{where}: unexpected input '{tensor.name}'; the model's inputs are {expected}"
                )
            if tensor.datatype != spec.datatype:
                raise InvalidArgument(
                    f"{where}, input '{tensor.name}': expected datatype {spec.datatype}, "
                    f"got {tensor.datatype}"
                )
            shape = tensor.data.shape
            if not spec.accepts(shape):
                raise InvalidArgument(
                    f"{where}, input '{tensor.name}': expected shape {_shape_text(spec.shape)}, "
                    f"got {_shape_text(shape)}"
                )
            if self.max_batch_size > 0:
                if shape[0] == 0:
                    raise InvalidArgument(
                        f"{where}, input '{tensor.name}': batch size 0; a request carries "
                        f"1 to {self.max_batch_size} items"
                    )
                if shape[0] > self.max_batch_size:
                    raise InvalidArgument(
                        f"{where}, input '{tensor.name}': batch size {shape[0]} exceeds "
                        f"max_batch_size {self.max_batch_size}"
                    )
                if batch_size is None:
                    batch_size = shape[0]
                elif shape[0] != batch_size:
                    raise InvalidArgument(
                        f"{where}: inputs disagree on batch size ({batch_size} vs "
                        f"{shape[0]} for '{tensor.name}')"
                    )
        missing = [n for n, s in self.inputs.items() if not s.optional and n not in given]
        if missing:
            names = ", ".join(f"'{n}'" for n in missing)
            raise InvalidArgument(f"{where}: missing required input(s) {names}")
        requested: set[str] = set()
        for output in request.outputs:
            if output.name in requested:
                raise InvalidArgument(f"{where}: output '{output.name}' requested twice")
            requested.add(output.name)
            if output.name not in self.outputs:
                expected = ", ".join(f"'{n}'" for n in self.outputs) or "none"
                raise InvalidArgument(
                    f"{where}: unknown output '{output.name}' requested; the model's outputs "
                    f"are {expected}"
                )

    def to_model_shapes(self, request: InferRequest) -> InferRequest:
        """The request as the backend must see it (``reshape`` applied)."""
        if not any(s.model_shape is not None for s in self.inputs.values()):
            return request
        inputs = [self._reshape(t, self.inputs.get(t.name), to_model=True) for t in request.inputs]
        return InferRequest(
            model_name=request.model_name,
            inputs=inputs,
            model_version=request.model_version,
            id=request.id,
            outputs=request.outputs,
            parameters=request.parameters,
            is_cancelled=request.is_cancelled,
        )

    def to_client_shapes(self, response: InferResponse) -> InferResponse:
        if not any(s.model_shape is not None for s in self.outputs.values()):
            return response
        response.outputs = [
            self._reshape(t, self.outputs.get(t.name), to_model=False) for t in response.outputs
        ]
        return response

    @staticmethod
    def _reshape(tensor: Tensor, spec: TensorSpec | None, to_model: bool) -> Tensor:
        if spec is None or spec.model_shape is None:
            return tensor
        target = spec.model_shape if to_model else spec.shape
        if target and target[0] == -1:
            target = (tensor.data.shape[0], *target[1:])
        data = np.reshape(tensor.data, target)
        return Tensor(tensor.name, tensor.datatype, data)


def _type_name(data_type: int) -> str:
    return model_config_pb2.DataType.Name(data_type)


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
