"""The only place in the gRPC transport that reads ``ErrorCode``: each code
becomes the gRPC status Triton's gRPC frontend gives its own code, with the
message text HTTP sends.

One deliberate reading: UNSUPPORTED is ``UNIMPLEMENTED``, as Triton's gRPC
frontend maps ``TRITONSERVER_ERROR_UNSUPPORTED`` (its HTTP frontend answers
501; edgebox's HTTP answers 400).
Spec: https://grpc.github.io/grpc/core/md_doc_statuscodes.html
"""

from __future__ import annotations

import grpc

from edgebox.errors import EdgeboxError, ErrorCode

STATUS_BY_CODE = {
    ErrorCode.INVALID_ARG: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorCode.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorCode.CANCELLED: grpc.StatusCode.CANCELLED,
}


def status_of(error: EdgeboxError) -> tuple[grpc.StatusCode, str]:
    """The status and details a call that failed with ``error`` ends with."""
    return STATUS_BY_CODE[error.code], str(error)
