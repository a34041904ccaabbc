"""Triton's generate extension: ``POST /v2/models/{m}[/versions/{v}]/generate``
answers one JSON object, ``.../generate_stream`` answers server-sent events
(``data: {...}\\n\\n`` per response) as the model sends them; what decoupled
models are for, though any model may be called so.

The request body is one JSON object. A key naming a model input is that
input: a JSON value, list or nested list, shaped by the config (its one
variable dimension, the batch dimension first, takes what the element count
leaves; a scalar is one element). Any other key is a request parameter
(a string, integer or boolean). A response is one object: each output by
name (a scalar when it holds one element, else its elements as a flat list;
BYTES as text), then ``model_name`` and ``model_version``. An error the
model sends mid-stream is ``data: {"error": "..."}``. Errors found before
the model runs (unknown model, bad input) are answered with their status.

``generate`` needs exactly one response; otherwise it answers Triton's text
(Triton sends it with status 200 since its head is already out; edgebox,
which has not sent one yet, answers 400).
Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_generate.md
"""

from __future__ import annotations

import json
import math
import queue
from collections.abc import Iterator
from http import HTTPStatus

import numpy as np

from edgebox.dataplane import DataPlane
from edgebox.errors import EdgeboxError, InvalidArgument
from edgebox.protocol.http.error_map import error_response
from edgebox.protocol.http.messages import HttpRequest, HttpResponse, json_error_response
from edgebox.protocol.http.request_json import parse_object
from edgebox.responses import Outcome
from edgebox.tensors import InferRequest, InferResponse, Tensor, numpy_dtype

NOT_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model "
    "that generates various number of responses"
)
"""Triton 2.51's text when ``generate`` gets zero or several responses."""

EVENT_STREAM = "text/event-stream; charset=utf-8"


def generate(
    dataplane: DataPlane, request: HttpRequest, name: str, version: str, stream: bool
) -> HttpResponse:
    """Run one generate request; ``stream`` for ``generate_stream``."""
    dataplane.check_servable(name, version)
    infer_request = _decode(dataplane, request.body, name, version)
    infer_request.is_cancelled = request.client_gone
    responses = _Queued()
    dataplane.infer_stream(infer_request, responses)
    first = responses.next()
    if stream:
        if isinstance(first[0], EdgeboxError) and first[1]:
            return error_response(first[0])
        return HttpResponse(200, content_type=EVENT_STREAM, stream=_events(first, responses))
    outcomes = [first]
    while not outcomes[-1][1]:
        outcomes.append(responses.next())
    for outcome, _ in outcomes:
        if isinstance(outcome, EdgeboxError):
            return error_response(outcome)
    answers = [outcome for outcome, _ in outcomes if outcome is not None]
    if len(answers) != 1:
        return json_error_response(HTTPStatus.BAD_REQUEST, NOT_ONE_RESPONSE)
    return HttpResponse(200, [json.dumps(_render(answers[0])).encode()])


class _Queued:
    """The request's sink: hands each send to the worker thread that writes
    the answer; ``send`` never blocks."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Outcome, bool]] = queue.SimpleQueue()

    def send(self, response: Outcome, final: bool) -> None:
        self._queue.put((response, final))

    def next(self) -> tuple[Outcome, bool]:
        return self._queue.get()


def _events(first: tuple[Outcome, bool], responses: _Queued) -> Iterator[bytes]:
    """The SSE body: one ``data:`` event per response, until the final."""
    outcome, final = first
    while True:
        if isinstance(outcome, EdgeboxError):
            document = {"error": str(outcome)}
        elif outcome is not None:
            document = _render(outcome)
        else:
            document = None
        if document is not None:
            yield b"data: " + json.dumps(document).encode() + b"\n\n"
        if final:
            return
        outcome, final = responses.next()


def _decode(dataplane: DataPlane, body: memoryview, name: str, version: str) -> InferRequest:
    where = f"generate for model '{name}'"
    if not len(body):
        raise InvalidArgument(f"{where}: the body must be a JSON object of inputs and parameters")
    document = parse_object(body, where)
    specs = {spec.name: spec for spec in dataplane.model_metadata(name, version).inputs}
    inputs = []
    parameters = {}
    for key, value in document.items():
        spec = specs.get(key)
        if spec is None:
            if isinstance(value, (str, int, bool)):
                parameters[key] = value
                continue
            raise InvalidArgument(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', "
                "or 'string'."
            )
        inputs.append(_tensor(where, spec, value))
    return InferRequest(name, inputs, model_version=version, parameters=parameters)


def _tensor(where: str, spec, value) -> Tensor:
    where = f"{where}, input '{spec.name}'"
    try:
        if spec.datatype == "BYTES":
            flat = np.array(value, dtype=object).reshape(-1)
            data = np.array(
                [v.encode() if isinstance(v, str) else _scalar_bytes(v) for v in flat],
                dtype=object,
            )
        else:
            data = np.array(value, dtype=numpy_dtype(spec.datatype)).reshape(-1)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidArgument(f"{where}: cannot read the value as {spec.datatype}: {exc}") from None
    return Tensor(spec.name, spec.datatype, data.reshape(_shape(where, spec.shape, data.size)))


def _scalar_bytes(value) -> bytes:
    if isinstance(value, (list, dict)) or value is None:
        raise TypeError(f"expected text, got {json.dumps(value)}")
    return json.dumps(value).encode()


def _shape(where: str, dims: tuple[int, ...], count: int) -> tuple[int, ...]:
    """The config's shape for ``count`` elements: its first variable
    dimension takes what the others leave, any other is 1."""
    variable = [index for index, dim in enumerate(dims) if dim < 0]
    shape = [1 if dim < 0 else dim for dim in dims]
    fixed = math.prod(shape)
    if variable and fixed and count % fixed == 0:
        shape[variable[0]] = count // fixed
    if math.prod(shape) != count:
        raise InvalidArgument(
            f"{where}: {count} element(s) do not fit the shape {list(dims)} of the config"
        )
    return tuple(shape)


def _render(response: InferResponse) -> dict:
    document: dict = {}
    for tensor in response.outputs:
        flat = np.asarray(tensor.data).reshape(-1)
        if tensor.datatype == "BYTES":
            values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in flat]
        else:
            values = flat.tolist()
        document[tensor.name] = values[0] if len(values) == 1 else values
    document["model_name"] = response.model_name
    document["model_version"] = response.model_version
    return document
