"""error_map: every ErrorCode has its gRPC status (Triton's gRPC frontend's
mapping) and the message goes out unchanged."""

from __future__ import annotations

import grpc
import pytest

from edgebox.errors import EdgeboxError, ErrorCode
from edgebox.protocol.grpc.error_map import STATUS_BY_CODE, status_of


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.INVALID_ARG, grpc.StatusCode.INVALID_ARGUMENT),
        (ErrorCode.NOT_FOUND, grpc.StatusCode.NOT_FOUND),
        (ErrorCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE),
        (ErrorCode.UNSUPPORTED, grpc.StatusCode.UNIMPLEMENTED),
        (ErrorCode.ALREADY_EXISTS, grpc.StatusCode.ALREADY_EXISTS),
        (ErrorCode.INTERNAL, grpc.StatusCode.INTERNAL),
        (ErrorCode.CANCELLED, grpc.StatusCode.CANCELLED),
    ],
)
def test_each_code_maps_to_tritons_grpc_status_with_the_message_unchanged(code, status):
    error = EdgeboxError("model 'm', input 'X': expected datatype FP32, got INT8", code)
    assert status_of(error) == (status, "model 'm', input 'X': expected datatype FP32, got INT8")


def test_every_error_code_is_mapped():
    assert set(STATUS_BY_CODE) == set(ErrorCode)
