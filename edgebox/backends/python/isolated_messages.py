"""The JSON form of requests, responses and errors on the channel between
the daemon and an isolated python model process; their tensors are
descriptors into a region or a payload (``tensor_region``).

Both ends import this module, so the two sides cannot disagree on a field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from edgebox.errors import (
    EdgeboxError,
    ErrorCode,
    InvalidArgument,
    NotFound,
    Unavailable,
    Unsupported,
)
from edgebox.tensors import InferRequest, InferResponse, RequestedOutput, Tensor

EXIT_OUT_OF_MEMORY = 86
"""The child's exit status after the model ran out of memory in ``execute``."""


def request_header(request: InferRequest, inputs: list[dict]) -> dict:
    return {
        "model_name": request.model_name,
        "model_version": request.model_version,
        "id": request.id,
        "inputs": inputs,
        "outputs": [
            {"name": output.name, "parameters": output.parameters} for output in request.outputs
        ],
        "parameters": request.parameters,
    }


def request_from_header(header: dict, read: Callable[[dict], Tensor]) -> InferRequest:
    return InferRequest(
        header["model_name"],
        inputs=[read(descriptor) for descriptor in header["inputs"]],
        model_version=header.get("model_version", ""),
        id=header.get("id", ""),
        outputs=[
            RequestedOutput(output["name"], output.get("parameters") or {})
            for output in header.get("outputs", [])
        ],
        parameters=header.get("parameters") or {},
    )


def response_header(response: InferResponse, outputs: list[dict]) -> dict:
    return {
        "model_name": response.model_name,
        "model_version": response.model_version,
        "id": response.id,
        "outputs": outputs,
        "parameters": response.parameters,
    }


def response_from_header(header: dict, read: Callable[[dict], Tensor]) -> InferResponse:
    return InferResponse(
        header["model_name"],
        model_version=str(header.get("model_version", "")),
        outputs=[read(descriptor) for descriptor in header["outputs"]],
        id=header.get("id", ""),
        parameters=header.get("parameters") or {},
    )


def error_header(error: EdgeboxError) -> dict:
    """``answered_by_model`` travels too: the daemon's statistics count a
    model's own error answer as a success (as Triton does)."""
    header = {"error": str(error), "code": error.code.value}
    if error.answered_by_model:
        header["answered_by_model"] = True
    return header


_ERROR_CLASSES = {
    error.code: error for error in (InvalidArgument, NotFound, Unavailable, Unsupported)
}


def error_from_header(header: dict) -> EdgeboxError:
    """The error as the other side had it: same class where the code has one."""
    try:
        code = ErrorCode(header.get("code", ErrorCode.INTERNAL.value))
    except ValueError:
        code = ErrorCode.INTERNAL
    answered = header.get("answered_by_model") is True
    error_class = _ERROR_CLASSES.get(code)
    if error_class is not None:
        return error_class(str(header["error"]), answered_by_model=answered)
    return EdgeboxError(str(header["error"]), code, answered_by_model=answered)


def is_error(header: dict) -> bool:
    return "error" in header


def results_header(
    results: Sequence[InferResponse | EdgeboxError], outputs: Sequence[list[dict] | None]
) -> list[dict[str, Any]]:
    """One entry per request: its response (with ``outputs`` descriptors) or its error."""
    return [
        error_header(result) if isinstance(result, EdgeboxError) else response_header(result, out)
        for result, out in zip(results, outputs, strict=True)
    ]
