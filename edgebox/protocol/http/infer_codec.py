"""KServe v2 inference requests and responses over HTTP, in one place: the JSON
header, JSON tensors, and Triton's binary tensor extension.

A request body is either all JSON, or a JSON header of
``Inference-Header-Content-Length`` bytes followed by the binary tensors in the
order the header lists them. Outputs go back binary when the request asks
(``binary_data`` per output, or ``binary_data_output`` for all).
Tensors whose parameters name a ``shared_memory_region`` are read from / written
into that registered region instead (Triton's system shared memory extension):
an input is a read-only view of the mapping, an output is listed without data
or parameters, as Triton lists it.
Spec: https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md#inference
"""

from __future__ import annotations

import json

from edgebox.errors import InvalidArgument
from edgebox.protocol import shared_memory, tensor_codec
from edgebox.protocol.http import json_codec
from edgebox.protocol.http.messages import HttpResponse
from edgebox.protocol.http.request_json import parse_object
from edgebox.protocol.shared_memory import RegionLease
from edgebox.tensors import DATATYPES, InferRequest, InferResponse, RequestedOutput, Tensor

HEADER_LENGTH = "inference-header-content-length"


def decode_request(
    body: memoryview,
    headers: dict[str, str],
    model_name: str,
    model_version: str,
    regions: RegionLease | None = None,
) -> tuple[InferRequest, bool]:
    """The request and whether outputs default to binary. Shared-memory
    inputs and outputs need ``regions`` (Unsupported without it)."""
    where = f"model '{model_name}'"
    header_text = headers.get(HEADER_LENGTH)
    if header_text is None:
        json_part, binary = body, body[len(body) :]
    else:
        try:
            header_length = int(header_text)
        except ValueError:
            raise InvalidArgument(
                f"Inference-Header-Content-Length must be an integer, got '{header_text}'"
            ) from None
        if not 0 <= header_length <= len(body):
            raise InvalidArgument(
                f"Inference-Header-Content-Length is {header_length} but the body holds "
                f"{len(body)} bytes"
            )
        json_part, binary = body[:header_length], body[header_length:]
    document = parse_object(json_part, where)
    inputs_json = document.get("inputs")
    if not isinstance(inputs_json, list):
        raise InvalidArgument(f"{where}: request needs an 'inputs' list")
    parameters = _parameters(document, where)
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise InvalidArgument(f"{where}: 'id' must be a string")

    inputs: list[Tensor] = []
    offset = 0
    for position, item in enumerate(inputs_json):
        tensor, used = _decode_input(item, position, where, binary, offset, regions)
        inputs.append(tensor)
        offset += used
    if offset != len(binary):
        raise InvalidArgument(
            f"{where}: the body has {len(binary) - offset} bytes of binary data that no "
            "input claims (check binary_data_size)"
        )
    outputs = [_decode_output(item, where, regions) for item in _list(document, "outputs", where)]
    request = InferRequest(
        model_name=model_name,
        model_version=model_version,
        id=request_id,
        inputs=inputs,
        outputs=outputs,
        parameters=parameters,
    )
    return request, bool(parameters.get("binary_data_output", False))


def encode_response(
    response: InferResponse,
    request: InferRequest,
    binary_default: bool,
    regions: RegionLease | None = None,
) -> HttpResponse:
    """The HTTP answer; outputs asked into shared memory are written there
    first (InvalidArgument, nothing written, when one does not fit)."""
    where = f"model '{response.model_name}' version {response.model_version}"
    asked = {o.name: o.parameters for o in request.outputs}
    placed = shared_memory.place_outputs(where, response.outputs, asked, regions)
    outputs = []
    buffers: list = []
    for tensor in response.outputs:
        entry: dict = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.data.shape),
        }
        outputs.append(entry)
        if tensor.name in placed:
            continue
        if asked.get(tensor.name, {}).get("binary_data", binary_default):
            data = tensor_codec.encode_tensor(tensor)
            entry["parameters"] = {"binary_data_size": _nbytes(data)}
            buffers.append(data)
        else:
            entry["data"] = json_codec.encode_tensor(where, tensor)
    document: dict = {
        "model_name": response.model_name,
        "model_version": response.model_version,
        "outputs": outputs,
    }
    if response.id:
        document["id"] = response.id
    if response.parameters:
        document["parameters"] = response.parameters
    header = json.dumps(document, separators=(",", ":")).encode()
    if not buffers:
        return HttpResponse(200, [header])
    return HttpResponse(
        200,
        [header, *buffers],
        content_type="application/octet-stream",
        headers=[("Inference-Header-Content-Length", str(len(header)))],
    )


def _decode_input(
    item, position: int, where: str, binary: memoryview, offset: int, regions: RegionLease | None
):
    if not isinstance(item, dict):
        raise InvalidArgument(f"{where}: input #{position} must be an object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"{where}: input #{position} needs a 'name'")
    at = f"{where}, input '{name}'"
    datatype = item.get("datatype")
    if datatype not in DATATYPES:
        raise InvalidArgument(f"{at}: unknown datatype {datatype!r}")
    shape = item.get("shape")
    count = tensor_codec.element_count(at, shape)
    parameters = item.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"{at}: 'parameters' must be an object")
    raw = shared_memory.tensor_view(at, parameters, regions)
    if raw is not None:
        data = tensor_codec.decode_tensor(
            at, datatype, shape, count, raw, size_field="shared_memory_byte_size"
        )
        return Tensor(name, datatype, data), 0
    if "binary_data_size" in parameters:
        size = parameters["binary_data_size"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidArgument(f"{at}: binary_data_size must be a non-negative integer")
        if offset + size > len(binary):
            raise InvalidArgument(
                f"{at}: binary_data_size {size} runs past the end of the body "
                f"({len(binary) - offset} bytes of binary data left)"
            )
        data = tensor_codec.decode_tensor(
            at, datatype, shape, count, binary[offset : offset + size]
        )
        return Tensor(name, datatype, data), size
    if "data" not in item:
        raise InvalidArgument(f"{at}: needs 'data' or parameters.binary_data_size")
    data = json_codec.decode_tensor(at, datatype, shape, count, item["data"])
    return Tensor(name, datatype, data), 0


def _decode_output(item, where: str, regions: RegionLease | None) -> RequestedOutput:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise InvalidArgument(f"{where}: each requested output needs a 'name'")
    parameters = item.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"{where}, output '{item['name']}': 'parameters' must be an object")
    shared_memory.tensor_view(f"{where}, output '{item['name']}'", parameters, regions, True)
    return RequestedOutput(item["name"], parameters)


def _parameters(document: dict, where: str) -> dict:
    parameters = document.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"{where}: 'parameters' must be an object")
    return parameters


def _list(document: dict, key: str, where: str) -> list:
    value = document.get(key) or []
    if not isinstance(value, list):
        raise InvalidArgument(f"{where}: '{key}' must be a list")
    return value


def _nbytes(buffer) -> int:
    return buffer.nbytes if hasattr(buffer, "nbytes") else len(buffer)
