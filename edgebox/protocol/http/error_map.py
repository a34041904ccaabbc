"""The only place that knows HTTP statuses: EdgeboxError.code -> status, and
the ``{"error": "..."}`` body KServe v2 and Triton use for every failure."""

from __future__ import annotations

from http import HTTPStatus

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.protocol.http.messages import HttpResponse, json_error_response

STATUS_BY_CODE = {
    ErrorCode.INVALID_ARG: HTTPStatus.BAD_REQUEST,
    ErrorCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorCode.UNSUPPORTED: HTTPStatus.BAD_REQUEST,
    ErrorCode.ALREADY_EXISTS: HTTPStatus.CONFLICT,
    ErrorCode.INTERNAL: HTTPStatus.INTERNAL_SERVER_ERROR,
    # Triton's HTTP frontend answers CANCELLED with 400; the client left anyway.
    ErrorCode.CANCELLED: HTTPStatus.BAD_REQUEST,
}


def error_response(error: EdgeboxError) -> HttpResponse:
    return json_error_response(STATUS_BY_CODE[error.code], str(error))
