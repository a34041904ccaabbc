"""KServe v2 ``ModelInferRequest`` / ``ModelInferResponse`` messages to and
from edgebox's requests and responses.

Input data comes either in ``raw_input_contents`` (one entry per input, in the
order of ``inputs``: the same bytes as Triton's binary HTTP extension, decoded
by ``tensor_codec`` as numpy views) or in each input's typed ``contents``
(never both in one request, as in Triton). Outputs go back in
``raw_output_contents``, as Triton sends them. A tensor whose parameters name
a ``shared_memory_region`` takes no ``raw_input_contents`` entry: an input is a
read-only view of the registered region, an output is written into it and
answered, as Triton answers it, with its metadata alone and an empty
``raw_output_contents`` entry (so later entries keep their positions).
Spec: https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/grpc_predict_v2.proto
"""

from __future__ import annotations

import numpy as np
from tritonclient.grpc import service_pb2 as pb

from edgebox.errors import InvalidArgument
from edgebox.protocol import shared_memory, tensor_codec
from edgebox.protocol.shared_memory import RegionLease
from edgebox.tensors import (
    DATATYPES,
    InferRequest,
    InferResponse,
    RequestedOutput,
    Tensor,
    numpy_dtype,
)

CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
"""The typed ``contents`` field that carries each datatype; FP16 and BF16 have
none and travel in ``raw_input_contents`` only."""


def decode_request(
    message: pb.ModelInferRequest,
    regions: RegionLease | None = None,
    raw: list | None = None,
) -> InferRequest:
    """The request ``message`` holds, checked as HTTP checks its requests
    (datatype, shape, data size); the model's own checks come later, in the
    dataplane. Fixed-size raw inputs are views over the message's bytes, or
    over ``raw``'s entries when the raw contents were split off before
    parsing (``raw_messages``). Shared-memory inputs and outputs need
    ``regions`` (Unsupported without)."""
    name = message.model_name
    where = f"model '{name}'"
    if raw is None:
        raw = list(message.raw_input_contents)
    inputs: list[Tensor] = []
    used = 0
    total = len(message.inputs)
    for position, item in enumerate(message.inputs):
        tensor, took = _decode_input(item, position, total, where, raw, used, regions)
        inputs.append(tensor)
        used += took
    if raw and used != len(raw):
        raise InvalidArgument(
            f"{where}: the request has {len(raw)} raw_input_contents for {used} inputs "
            "(one entry per input, in the order of 'inputs')"
        )
    return InferRequest(
        model_name=name,
        model_version=message.model_version,
        id=message.id,
        inputs=inputs,
        outputs=[_decode_output(item, where, regions) for item in message.outputs],
        parameters=parameters_of(message.parameters),
    )


def encode_response(
    response: InferResponse,
    request: InferRequest | None = None,
    regions: RegionLease | None = None,
) -> pb.ModelInferResponse:
    """``response`` as Triton answers: every output's bytes in
    ``raw_output_contents``, in the order of ``outputs``; outputs ``request``
    asked into shared memory are written there first (InvalidArgument, nothing
    written, when one does not fit)."""
    message, raw = encode_response_parts(response, request, regions)
    for data in raw:
        message.raw_output_contents.append(data.tobytes() if hasattr(data, "tobytes") else data)
    return message


def encode_response_parts(
    response: InferResponse,
    request: InferRequest | None = None,
    regions: RegionLease | None = None,
) -> tuple[pb.ModelInferResponse, list]:
    """``encode_response``'s message without its ``raw_output_contents``,
    and those entries (bytes or C-contiguous arrays), for a caller that
    writes them into the answer itself (``raw_messages``)."""
    message = pb.ModelInferResponse(
        model_name=response.model_name, model_version=response.model_version, id=response.id
    )
    asked = {o.name: o.parameters for o in request.outputs} if request is not None else {}
    where = f"model '{response.model_name}' version {response.model_version}"
    placed = shared_memory.place_outputs(where, response.outputs, asked, regions)
    raw: list = []
    for tensor in response.outputs:
        message.outputs.add(
            name=tensor.name, datatype=tensor.datatype, shape=list(tensor.data.shape)
        )
        if tensor.name in placed:
            raw.append(b"")
            continue
        raw.append(tensor_codec.encode_tensor(tensor))
    set_parameters(message.parameters, response.parameters)
    return message, raw


def parameters_of(entries) -> dict:
    """A protobuf ``map<string, InferParameter>`` as a plain dict (an unset
    choice becomes None)."""
    values = {}
    for key, parameter in entries.items():
        choice = parameter.WhichOneof("parameter_choice")
        values[key] = getattr(parameter, choice) if choice else None
    return values


def set_parameters(entries, values: dict) -> None:
    """Fill a ``map<string, InferParameter>`` from a dict of plain values;
    anything but bool, int, float or str is sent as its text."""
    for key, value in values.items():
        parameter = entries[key]
        if isinstance(value, bool):
            parameter.bool_param = value
        elif isinstance(value, int):
            if value >= 2**63:
                parameter.uint64_param = value
            else:
                parameter.int64_param = value
        elif isinstance(value, float):
            parameter.double_param = value
        else:
            parameter.string_param = str(value)


def _decode_input(
    item,
    position: int,
    total: int,
    where: str,
    raw: list[bytes],
    used: int,
    regions: RegionLease | None,
):
    """The tensor of input ``item`` and how many ``raw`` entries it took."""
    if not item.name:
        raise InvalidArgument(f"{where}: input #{position} needs a 'name'")
    at = f"{where}, input '{item.name}'"
    datatype = item.datatype
    if datatype not in DATATYPES:
        raise InvalidArgument(f"{at}: unknown datatype {datatype!r}")
    shape = list(item.shape)
    count = tensor_codec.element_count(at, shape)
    shared = shared_memory.tensor_view(at, parameters_of(item.parameters), regions)
    if shared is not None:
        data = tensor_codec.decode_tensor(
            at, datatype, shape, count, shared, size_field="shared_memory_byte_size"
        )
        return Tensor(item.name, datatype, data), 0
    has_contents = item.HasField("contents")
    if raw:
        if has_contents:
            raise InvalidArgument(
                f"{at}: 'contents' must be empty when the request uses raw_input_contents"
            )
        if used >= len(raw):
            raise InvalidArgument(
                f"{at}: no raw_input_contents entry for it (the request has {len(raw)} for "
                f"{total} inputs)"
            )
        data = tensor_codec.decode_tensor(
            at,
            datatype,
            shape,
            count,
            memoryview(raw[used]),
            size_field=f"the size of raw_input_contents[{used}]",
        )
        return Tensor(item.name, datatype, data), 1
    if not has_contents and count:
        raise InvalidArgument(f"{at}: no data; send it in raw_input_contents or 'contents'")
    return Tensor(item.name, datatype, _decode_contents(at, datatype, shape, count, item)), 0


def _decode_contents(at: str, datatype: str, shape: list[int], count: int, item) -> np.ndarray:
    expected = CONTENTS_FIELD.get(datatype)
    present = [field.name for field, _ in item.contents.ListFields()]
    for field in present:
        if field != expected:
            carried = (
                f"is carried in '{expected}'" if expected else "must be sent in raw_input_contents"
            )
            raise InvalidArgument(
                f"{at}: 'contents' holds '{field}' but datatype {datatype} {carried}"
            )
    if expected is None:
        if count:
            raise InvalidArgument(
                f"{at}: datatype {datatype} has no typed 'contents' field; send it in "
                "raw_input_contents"
            )
        return np.empty(shape, dtype=numpy_dtype(datatype))
    values = getattr(item.contents, expected)
    if len(values) != count:
        raise InvalidArgument(
            f"{at}: '{expected}' holds {len(values)} elements, shape {shape} needs {count}"
        )
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        for index, value in enumerate(values):
            array[index] = value
        return array.reshape(shape)
    dtype = numpy_dtype(datatype)
    if dtype.kind in "iu" and dtype.itemsize < 4:
        wide = np.fromiter(values, dtype=np.int64, count=count)
        limits = np.iinfo(dtype)
        outside = wide[(wide < limits.min) | (wide > limits.max)]
        if outside.size:
            raise InvalidArgument(
                f"{at}: '{expected}' value {int(outside[0])} is out of range for {datatype} "
                f"({limits.min}..{limits.max})"
            )
        return wide.astype(dtype).reshape(shape)
    return np.fromiter(values, dtype=dtype, count=count).reshape(shape)


def _decode_output(item, where: str, regions: RegionLease | None) -> RequestedOutput:
    if not item.name:
        raise InvalidArgument(f"{where}: each requested output needs a 'name'")
    parameters = parameters_of(item.parameters)
    shared_memory.tensor_view(f"{where}, output '{item.name}'", parameters, regions, True)
    return RequestedOutput(item.name, parameters)
