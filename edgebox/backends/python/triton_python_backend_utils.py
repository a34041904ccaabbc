"""The ``pb_utils`` module that Triton ``model.py`` files import.

A model written for Triton says ``import triton_python_backend_utils as
pb_utils``; ``model_import`` registers this module under that name before
importing any model, so the same file runs under Triton and under edgebox.
The names, signatures and error behaviour follow Triton's python backend
(https://github.com/triton-inference-server/python_backend#usage), with two
differences that come from running in-process: tensors are the request's own
numpy arrays (no shared-memory copy), and an isolated model may not be
decoupled (response senders exist in-process only). An input array another
consumer also reads (an ensemble's sibling step, a BLS caller) arrives
read-only from edgebox and is handed to the model as a copy, so a model may
write into its inputs, as it may under Triton, without changing what anyone
else sees. Datatype numbers and numpy types come from ``edgebox/tensors.py``
and model_config.proto, never from a table of this module's own.

BLS calls (``InferenceRequest(...).exec()``) go through the one infer function
the daemon hands the python backend; every model in the process shares it.
A BLS call from ``execute`` back into a model whose only instance is the caller
waits for itself, exactly as it deadlocks under Triton.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import logging
import queue
import struct
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2

from edgebox import tensors
from edgebox.backends.python import custom_metrics
from edgebox.errors import EdgeboxError, ErrorCode

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

_TRITON_DTYPE_BY_DATATYPE: dict[str, int] = {
    datatype: model_config_pb2.DataType.Value(tensors.datatype_to_config_type(datatype))
    for datatype in sorted(tensors.DATATYPES)
}
"""Triton's numeric DataType values (FP32 is 11), model_config.proto's ``TYPE_*``."""
_BF16 = _TRITON_DTYPE_BY_DATATYPE["BF16"]
_BYTES = _TRITON_DTYPE_BY_DATATYPE["BYTES"]
_NUMPY_DATATYPES = sorted(tensors.DATATYPES - {"BF16"}, key=_TRITON_DTYPE_BY_DATATYPE.get)
"""The datatypes numpy carries as themselves; BF16 travels as raw ``uint16``."""
_NUMPY_BY_TRITON_DTYPE: dict[int, type] = {
    _TRITON_DTYPE_BY_DATATYPE[datatype]: tensors.numpy_dtype(datatype).type
    for datatype in _NUMPY_DATATYPES
}
_TRITON_DTYPE_BY_NUMPY: dict[np.dtype, int] = {
    tensors.numpy_dtype(datatype): _TRITON_DTYPE_BY_DATATYPE[datatype]
    for datatype in _NUMPY_DATATYPES
    if datatype != "BYTES"
}

TRITON_STRING_TO_NUMPY: dict[str, type] = {
    tensors.datatype_to_config_type(datatype): tensors.numpy_dtype(datatype).type
    for datatype in _NUMPY_DATATYPES
}
# Triton's own table has Python's bool here (np.bool_ everywhere else).
TRITON_STRING_TO_NUMPY["TYPE_BOOL"] = bool

_model_log = logging.getLogger("edgebox.model")
_log = logging.getLogger("edgebox.backends.python")

_infer_function: Any = None
"""The daemon's infer function for BLS; set by the runner when a model loads."""


_infer_stream_function: Any = None
"""The daemon's streaming infer function, for ``exec(decoupled=True)``."""


def _bind_infer_stream_function(infer_stream: Any) -> None:
    global _infer_stream_function
    _infer_stream_function = infer_stream


def _bind_infer_function(infer: Any) -> None:
    """The runner binds each model's ``context.infer`` as it loads; the daemon
    has one dataplane, so every model hands in the same function."""
    global _infer_function
    _infer_function = infer


# ---------------------------------------------------------------- errors


class TritonError:
    """An error attached to a response; ``code`` picks the status the client sees."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def __str__(self) -> str:
        return "" if self._message is None else str(self._message)

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, code={self._code})"


class TritonModelException(Exception):
    """Raised by pb_utils calls that cannot do what the model asked."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    def message(self) -> str:
        return self._message


_EDGEBOX_CODE_BY_TRITON = {
    TritonError.INVALID_ARG: ErrorCode.INVALID_ARG,
    TritonError.NOT_FOUND: ErrorCode.NOT_FOUND,
    TritonError.UNAVAILABLE: ErrorCode.UNAVAILABLE,
    TritonError.UNSUPPORTED: ErrorCode.UNSUPPORTED,
    TritonError.ALREADY_EXISTS: ErrorCode.ALREADY_EXISTS,
    TritonError.CANCELLED: ErrorCode.CANCELLED,
}
_TRITON_CODE_BY_EDGEBOX = {value: key for key, value in _EDGEBOX_CODE_BY_TRITON.items()}
_TRITON_CODE_BY_EDGEBOX[ErrorCode.INTERNAL] = TritonError.INTERNAL


def _edgebox_code(code: int) -> ErrorCode:
    """UNKNOWN and anything unexpected become INTERNAL."""
    return _EDGEBOX_CODE_BY_TRITON.get(code, ErrorCode.INTERNAL)


def _triton_code(code: ErrorCode) -> int:
    return _TRITON_CODE_BY_EDGEBOX.get(code, TritonError.INTERNAL)


# ---------------------------------------------------------------- tensors


class Tensor:
    """A named numpy array; the array is kept as given, never copied.

    ``triton_dtype`` only labels the data, for the one type numpy lacks: BF16
    travels as its raw ``uint16`` bits.
    """

    def __init__(self, name: str, numpy_array: Any, triton_dtype: int | None = None) -> None:
        if not isinstance(name, str):
            raise TritonModelException(f"tensor name must be a str, got {type(name).__name__}")
        array = numpy_array if isinstance(numpy_array, np.ndarray) else np.asarray(numpy_array)
        self._name = name
        self._array = array
        self._triton_dtype = (
            numpy_to_triton_type(array.dtype) if triton_dtype is None else triton_dtype
        )

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def triton_dtype(self) -> int | None:
        """Triton's DataType number (FP32 is 11, BYTES is 13); None for a numpy
        dtype Triton has no type for."""
        return self._triton_dtype

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, dtype={self._array.dtype}, shape={self.shape()})"


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    # Triton's serializer does the same for other objects (numbers, ...).
    return str(value).encode("utf-8")


def _bytes_array(array: np.ndarray) -> np.ndarray:
    """An object array of ``bytes``, the one form edgebox's codecs accept;
    returned as is when it already is one."""
    if array.dtype == np.object_ and all(type(item) is bytes for item in array.flat):
        return array
    converted = np.empty(array.shape, dtype=np.object_)
    flat = converted.reshape(-1)
    for index, item in enumerate(array.flat):
        flat[index] = _as_bytes(item)
    return converted


def _to_edgebox_tensor(tensor: Tensor) -> tensors.Tensor:
    """ValueError, naming the dtype, for arrays v2 has no datatype for."""
    array = tensor.as_numpy()
    if not isinstance(array, np.ndarray):
        raise ValueError(f"as_numpy() returned {type(array).__name__}, not a numpy array")
    if tensor.triton_dtype() == _BF16 and array.dtype == np.uint16:
        return tensors.Tensor(tensor.name(), "BF16", array)
    datatype = tensors.datatype_of(array)
    if datatype is None:
        raise ValueError(f"numpy dtype {array.dtype} has no KServe v2 datatype")
    if datatype == "BYTES":
        array = _bytes_array(array)
    return tensors.Tensor(tensor.name(), datatype, array)


def _from_edgebox_tensor(tensor: tensors.Tensor) -> Tensor:
    """The array as is when the model may write into it; a read-only one is
    shared with someone else, so the model gets a copy it may write."""
    data = tensor.data
    if not data.flags.writeable:
        data = data.copy()
    return Tensor(tensor.name, data, _TRITON_DTYPE_BY_DATATYPE.get(tensor.datatype))


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


# ---------------------------------------------------------------- requests and responses


def _parameters_dict(parameters: Any) -> dict[str, Any]:
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = json.loads(parameters) if parameters else {}
    if not isinstance(parameters, dict):
        raise TritonModelException(
            f"parameters must be a dict or a JSON object string, got {type(parameters).__name__}"
        )
    return dict(parameters)


# Protocol-level parameters that Triton consumes before a request reaches the
# model, so ``request.parameters()`` never shows them.
_RESERVED_PARAMETERS = frozenset(
    {
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "priority",
        "timeout",
        "headers",
        "binary_data_output",
    }
)


def _model_name_text(model_name: Any) -> str:
    """A BLS target's name: a str, or bytes as Triton's bls example passes
    (``as_numpy()[0]`` of a BYTES input), decoded as UTF-8. Anything else is
    a TypeError, as Triton's constructor raises for it."""
    if isinstance(model_name, str):
        return model_name
    if isinstance(model_name, bytes):
        try:
            return model_name.decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError(f"model_name is not valid UTF-8: {model_name!r}") from None
    raise TypeError(f"model_name must be a str (or UTF-8 bytes), got {type(model_name).__name__}")


class InferenceRequest:
    """A request handed to ``execute``, or a BLS request the model builds.

    Models build BLS requests with keyword arguments, as Triton's docs do;
    ``exec()`` runs one through the daemon and never raises for a failed
    inference: the failure comes back as the response's error.
    """

    def __init__(
        self,
        *,
        model_name: str | bytes,
        inputs: Sequence[Tensor],
        requested_output_names: Sequence[str],
        request_id: str = "",
        correlation_id: int | str = 0,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: Any = None,
        trace: Any = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        for tensor in inputs:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    f"inputs must hold pb_utils.Tensor objects, got {type(tensor).__name__}"
                )
        self._model_name = _model_name_text(model_name)
        self._model_version = model_version
        self._inputs = list(inputs)
        self._requested_output_names = list(requested_output_names)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._timeout = timeout
        self._parameters = _parameters_dict(parameters)
        self._is_cancelled: Any = None
        self._response_sender: InferenceResponseSender | None = None

    @classmethod
    def _wrap(
        cls,
        request: tensors.InferRequest,
        model_name: str,
        model_version: int,
        all_output_names: Sequence[str],
    ) -> InferenceRequest:
        """The request ``execute`` sees: the edgebox request's own arrays."""
        parameters = request.parameters
        flags = 0
        if parameters.get("sequence_start"):
            flags |= TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
        if parameters.get("sequence_end"):
            flags |= TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
        # Triton fills in every output when the client names none.
        requested = [output.name for output in request.outputs] or list(all_output_names)
        wrapped = cls(
            model_name=model_name,
            inputs=[_from_edgebox_tensor(tensor) for tensor in request.inputs],
            requested_output_names=requested,
            request_id=request.id,
            correlation_id=parameters.get("sequence_id", 0),
            model_version=model_version,
            flags=flags,
            timeout=parameters.get("timeout", 0),
            parameters={
                key: value for key, value in parameters.items() if key not in _RESERVED_PARAMETERS
            },
        )
        wrapped._is_cancelled = request.is_cancelled
        return wrapped

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def requested_output_names(self) -> list[str]:
        return self._requested_output_names

    def parameters(self) -> str:
        """JSON text, as Triton hands it to models."""
        return json.dumps(self._parameters)

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def flags(self) -> int:
        return self._flags

    def timeout(self) -> int:
        return self._timeout

    def is_cancelled(self) -> bool:
        """True once the client gave up on this request (closed its connection);
        a long-running model may check and stop early, as under Triton."""
        return self._is_cancelled is not None and bool(self._is_cancelled())

    def set_release_flags(self, flags: int) -> None:
        if flags != TRITONSERVER_REQUEST_RELEASE_ALL:
            raise TritonModelException(
                "request rescheduling (TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) is not "
                "supported by edgebox"
            )

    def get_response_sender(self) -> InferenceResponseSender:
        """The request's sender; the same object on every call. Only requests
        to a decoupled model have one."""
        if self._response_sender is None:
            raise TritonModelException(
                "get_response_sender() is for decoupled models "
                "(model_transaction_policy { decoupled: true }); this model returns its "
                "responses from execute()"
            )
        return self._response_sender

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on another model (BLS) and wait for its response;
        with ``decoupled=True`` an iterator over its responses instead (a
        decoupled model's zero or many, the last one empty when the model
        sent its final flag alone), each taken as the model sends it."""
        infer = _infer_stream_function if decoupled else _infer_function
        if infer is None:
            error = InferenceResponse(
                error=TritonError(
                    f"BLS request to model '{self._model_name}': no inference function was "
                    "given to the python backend, so other models cannot be called",
                    TritonError.UNAVAILABLE,
                )
            )
            return iter([error]) if decoupled else error
        request = self._edgebox_request()
        if isinstance(request, InferenceResponse):
            return iter([request]) if decoupled else request
        if decoupled:
            responses = _BlsResponses(self._model_name)
            try:
                infer(request, responses)
            except Exception as exc:
                _log.exception("BLS request to model '%s' failed", self._model_name)
                responses.send(EdgeboxError(f"{type(exc).__name__}: {exc}"), True)
            return responses.iterate()
        try:
            response = infer(request)
        except EdgeboxError as err:
            return InferenceResponse(error=TritonError(str(err), _triton_code(err.code)))
        except Exception as exc:
            _log.exception("BLS request to model '%s' failed", self._model_name)
            return InferenceResponse(
                error=TritonError(
                    f"BLS request to model '{self._model_name}': {type(exc).__name__}: {exc}",
                    TritonError.INTERNAL,
                )
            )
        return _from_edgebox_response(response)

    def _edgebox_request(self) -> tensors.InferRequest | InferenceResponse:
        """The BLS request as edgebox runs it, or the error response for an
        input that cannot be converted."""
        inputs = []
        for tensor in self._inputs:
            try:
                converted = _to_edgebox_tensor(tensor)
            except ValueError as exc:
                return InferenceResponse(
                    error=TritonError(
                        f"BLS request to model '{self._model_name}', "
                        f"input '{tensor.name()}': {exc}",
                        TritonError.INVALID_ARG,
                    )
                )
            # The caller keeps its arrays: a callee that writes gets a copy.
            converted.data = _read_only(converted.data)
            inputs.append(converted)
        return tensors.InferRequest(
            self._model_name,
            inputs=inputs,
            model_version="" if self._model_version == -1 else str(self._model_version),
            id=self._request_id,
            outputs=[tensors.RequestedOutput(name) for name in self._requested_output_names],
            parameters=self._bls_parameters(),
        )

    async def async_exec(self, decoupled: bool = False) -> Any:
        """``exec`` as an awaitable, for ``async def execute``: the call runs
        on the running loop's default executor (a thread pool), so calls
        awaited together (``asyncio.gather``) are in flight at once and the
        loop keeps serving the instance's other coroutines meanwhile. How
        many run at once is that pool's size (``min(32, CPUs + 4)``); more
        wait their turn. The response (or decoupled iterator) is ``exec``'s."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.exec, decoupled)

    def _bls_parameters(self) -> dict[str, Any]:
        parameters = dict(self._parameters)
        if self._correlation_id:
            parameters["sequence_id"] = self._correlation_id
        if self._flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
            parameters["sequence_start"] = True
        if self._flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
            parameters["sequence_end"] = True
        if self._timeout:
            parameters["timeout"] = self._timeout
        return parameters


class InferenceResponse:
    """The one response a model returns per request: tensors, or an error."""

    def __init__(
        self,
        output_tensors: Sequence[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        if output_tensors is None:
            output_tensors = []
        if not isinstance(output_tensors, (list, tuple)):
            raise TritonModelException('"output_tensors" must be a list.')
        for tensor in output_tensors:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    f"output_tensors must hold pb_utils.Tensor objects, got {type(tensor).__name__}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException(
                f"error must be a pb_utils.TritonError, got {type(error).__name__}"
            )
        self._output_tensors = list(output_tensors)
        self._error = error
        self._parameters = _parameters_dict(parameters)

    def output_tensors(self) -> list[Tensor]:
        return self._output_tensors

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


SENDER_CLOSED = "Unable to send response. Response sender has been closed."
"""python_backend's text for a send after the final one (a TritonModelException)."""


class InferenceResponseSender:
    """A decoupled model's way to answer one request: ``send`` zero or more
    responses, then one with ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL``
    (with or without a response), from ``execute`` or any thread it started.
    Each send goes straight on to the request's response sink; a send after
    the final raises, as under Triton, and nothing is sent."""

    def __init__(self, deliver: Any, is_cancelled: Any) -> None:
        self._deliver = deliver
        self._is_cancelled = is_cancelled
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is None and not final:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is "
                "not equal to TRITONSERVER_RESPONSE_COMPLETE_FINAL."
            )
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(
                f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}"
            )
        with self._lock:
            if self._closed:
                raise TritonModelException(SENDER_CLOSED)
            self._closed = final
        self._deliver(response, final)

    def is_cancelled(self) -> bool:
        """True once the client gave up on the request."""
        return self._is_cancelled is not None and bool(self._is_cancelled())

    def _close(self) -> bool:
        """Close the sender for the backend (its request failed); False if
        the model had already sent its final."""
        with self._lock:
            was_open, self._closed = not self._closed, True
        return was_open


def _from_edgebox_response(response: tensors.InferResponse) -> InferenceResponse:
    return InferenceResponse(
        output_tensors=[_from_edgebox_tensor(tensor) for tensor in response.outputs],
        parameters=response.parameters,
    )


class _BlsResponses:
    """The sink of a BLS ``exec(decoupled=True)``: the called model's sends,
    queued for the caller's iterator (``send`` never blocks)."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()

    def send(self, response: Any, final: bool) -> None:
        self._queue.put((response, final))

    def iterate(self) -> Any:
        while True:
            response, final = self._queue.get()
            if isinstance(response, EdgeboxError):
                yield InferenceResponse(
                    error=TritonError(str(response), _triton_code(response.code))
                )
            elif response is not None:
                yield _from_edgebox_response(response)
            elif final:
                yield InferenceResponse([])
            if final:
                return


# ---------------------------------------------------------------- helpers models call


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    for properties in model_config.get("input", []):
        if properties.get("name") == name:
            return properties
    return None


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    for properties in model_config.get("output", []):
        if properties.get("name") == name:
            return properties
    return None


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


def triton_string_to_numpy(triton_type_string: str) -> type:
    """``"TYPE_FP32"`` -> ``np.float32``; KeyError for names numpy cannot hold."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> type | None:
    return _NUMPY_BY_TRITON_DTYPE.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """A numpy dtype or scalar type -> Triton's DataType number; None when
    Triton has no such type. Every string dtype is BYTES (13)."""
    if data_type is None:
        return None
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    if dtype.kind in ("O", "S", "U"):
        return _BYTES
    return _TRITON_DTYPE_BY_NUMPY.get(dtype)


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | None:
    """Elements as 4-byte little-endian length + bytes, in C order: the layout
    of BYTES tensors in Triton's binary protocol. None for non-string arrays."""
    if input_tensor.dtype.kind not in ("O", "S", "U"):
        return None
    return tensors.serialize_bytes(_bytes_array(input_tensor))


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The inverse of ``serialize_byte_tensor``: a 1-D object array of bytes."""
    buffer = memoryview(encoded_tensor).cast("B")
    items = []
    offset = 0
    while offset < len(buffer):
        if offset + 4 > len(buffer):
            raise ValueError(f"serialized BYTES tensor is truncated at byte {offset}")
        (length,) = struct.unpack_from("<I", buffer, offset)
        offset += 4
        if offset + length > len(buffer):
            raise ValueError(f"serialized BYTES tensor is truncated at byte {offset}")
        items.append(bytes(buffer[offset : offset + length]))
        offset += length
    array = np.empty(len(items), dtype=np.object_)
    array[:] = items
    return array


# ---------------------------------------------------------------- auto-complete


class ModelConfig:
    """The config handed to ``auto_complete_config``; the model may add what
    its config.pbtxt leaves out but not contradict what it says, as in Triton.
    Contradictions raise ValueError, which fails the load with its message."""

    def __init__(self, model_config: dict | str) -> None:
        if isinstance(model_config, str):
            config = json.loads(model_config)
        else:
            config = copy.deepcopy(model_config)
        config.setdefault("input", [])
        config.setdefault("output", [])
        config.setdefault("max_batch_size", 0)
        self._model_config = config

    @property
    def _name(self) -> str:
        return self._model_config.get("name", "")

    def as_dict(self) -> dict:
        return self._model_config

    def max_batch_size(self) -> int:
        return int(self._model_config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self.max_batch_size()
        if current > max_batch_size:
            raise ValueError(
                f"model '{self._name}': configuration specified max_batch_size {current}, "
                f"but auto_complete_config() sets max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(
                    f"model '{self._name}': configuration specified scheduling_choice "
                    f"'{scheduler}', but auto_complete_config() sets 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict) -> None:
        self._add_tensor("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict) -> None:
        self._add_tensor("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict: dict) -> None:
        unknown = sorted(set(transaction_policy_dict) - {"decoupled"})
        if unknown:
            raise ValueError(
                f"model '{self._name}': model_transaction_policy in auto_complete_config() "
                f"has properties other than 'decoupled': {unknown}"
            )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    f"model '{self._name}': auto_complete_config() sets decoupled to "
                    f"{wanted}, but the configuration already sets it to {policy['decoupled']}"
                )
            policy["decoupled"] = wanted

    def _add_tensor(self, kind: str, tensor: dict, allowed: tuple[str, ...]) -> None:
        if not isinstance(tensor, dict):
            raise ValueError(
                f"model '{self._name}': add_{kind}() takes a dict, got {type(tensor).__name__}"
            )
        if "name" not in tensor:
            raise ValueError(
                f"model '{self._name}': {kind} in auto_complete_config() has no 'name'"
            )
        name = tensor["name"]
        label = f"model '{self._name}', {kind} '{name}'"
        unknown = sorted(set(tensor) - set(allowed))
        if unknown:
            names = ", ".join(f"'{key}'" for key in allowed)
            raise ValueError(f"{label}: unknown properties {unknown} (allowed: {names})")
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{label}: missing '{key}'")
        new = dict(tensor)
        new["dims"] = [int(dim) for dim in tensor["dims"]]
        for current in self._model_config[kind]:
            if current.get("name") != name:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type != "TYPE_INVALID" and current_type != new["data_type"]:
                raise ValueError(
                    f"{label}: configuration expects datatype {current_type}, "
                    f"model provides {new['data_type']}"
                )
            current_dims = [int(dim) for dim in current.get("dims", [])]
            if current_dims and current_dims != new["dims"]:
                raise ValueError(
                    f"{label}: the model expects dims {new['dims']} but the configuration "
                    f"specifies dims {current_dims}"
                )
            if "optional" in new and current.get("optional", new["optional"]) != new["optional"]:
                raise ValueError(
                    f"{label}: the model expects optional {new['optional']} but the "
                    f"configuration specifies optional {current['optional']}"
                )
            current.update(new)
            return
        self._model_config[kind].append(new)


# ---------------------------------------------------------------- custom metrics


class MetricKind(enum.IntEnum):
    """Triton's numbers for ``MetricFamily``'s ``kind``."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


# The stub exports MetricKind's values into the module too (``export_values``):
# python_backend's custom_metrics example passes ``kind=pb_utils.COUNTER``.
COUNTER = MetricKind.COUNTER
GAUGE = MetricKind.GAUGE
HISTOGRAM = MetricKind.HISTOGRAM

_CUSTOM_KIND = {
    MetricKind.COUNTER: custom_metrics.COUNTER,
    MetricKind.GAUGE: custom_metrics.GAUGE,
    MetricKind.HISTOGRAM: custom_metrics.HISTOGRAM,
}


class MetricFamily:
    """A custom metric family (python_backend 23.05+, histograms 24.xx),
    exported on the daemon's ``/metrics`` under its own name with the
    daemon's metrics, e.g. ``curl -s 127.0.0.1:8002/metrics | grep NAME``.
    A model running isolated (``process``) counts in its own process; what
    changed reaches the daemon's endpoint with its next answer
    (``custom_metrics.mirror``). Errors are TritonModelExceptions
    with Triton's texts; a ``kind`` that is not a ``MetricFamily`` kind is a
    TypeError, as Triton's constructor raises."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        if not isinstance(kind, MetricKind):
            raise TypeError(
                "MetricFamily(name: str, description: str, kind: MetricFamily.COUNTER, "
                f"GAUGE or HISTOGRAM): kind {kind!r} is not one of them"
            )
        if not isinstance(name, str) or not isinstance(description, str):
            raise TypeError(
                "MetricFamily(name: str, description: str, kind): name and description must be str"
            )
        try:
            family = custom_metrics.registry.family(name, description, _CUSTOM_KIND[kind])
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(str(err)) from None
        self._family = family
        self._kind = kind
        weakref.finalize(self, custom_metrics.registry.release_family, family)

    def Metric(
        self, labels: dict[str, str] | None = None, buckets: Sequence[float] | None = None
    ) -> Metric:
        return Metric(self, labels or {}, buckets)


class Metric:
    """One labelled series of a family: ``increment`` (counter, gauge),
    ``set`` (gauge), ``observe`` (histogram), ``value`` (counter, gauge).
    Each costs one lock and one addition; the series leaves the export
    once the model drops this object."""

    def __init__(
        self,
        family: MetricFamily,
        labels: dict[str, str] | None = None,
        buckets: Sequence[float] | None = None,
    ) -> None:
        if not isinstance(family, MetricFamily):
            raise TypeError(f"Metric() takes a pb_utils.MetricFamily, got {type(family).__name__}")
        try:
            key, series = custom_metrics.registry.series(family._family, labels or {}, buckets)
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(str(err)) from None
        self._owner = family
        self._family = family._family
        self._series = series
        weakref.finalize(self, custom_metrics.registry.release_series, self._family, key)

    def increment(self, value: float) -> None:
        try:
            custom_metrics.increment(self._family, self._series, float(value))
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(f"Failed to increment metric value: {err}") from None

    def set(self, value: float) -> None:
        try:
            custom_metrics.set_value(self._family, self._series, float(value))
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(f"Failed to set metric value: {err}") from None

    def observe(self, value: float) -> None:
        try:
            custom_metrics.observe(self._family, self._series, float(value))
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(f"Failed to observe metric value: {err}") from None

    def value(self) -> float:
        try:
            return custom_metrics.value_of(self._family, self._series)
        except custom_metrics.CustomMetricError as err:
            raise TritonModelException(f"Failed to get metric value: {err}") from None


# ---------------------------------------------------------------- logging


class LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LOGGING_LEVELS = {
    LogLevel.INFO: logging.INFO,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
    LogLevel.VERBOSE: logging.DEBUG,
}


class Logger:
    """Triton's model logger, writing to the ``edgebox.model`` Python logger
    so model messages land in the daemon's log (journald under systemd)."""

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        _model_log.log(_LOGGING_LEVELS.get(level, logging.INFO), "%s", message)

    @staticmethod
    def log_info(message: str) -> None:
        _model_log.info("%s", message)

    @staticmethod
    def log_warn(message: str) -> None:
        _model_log.warning("%s", message)

    @staticmethod
    def log_error(message: str) -> None:
        _model_log.error("%s", message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _model_log.debug("%s", message)
