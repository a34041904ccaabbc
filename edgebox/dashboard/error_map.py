"""The dashboard's own map from ``ErrorCode`` to an HTTP status (the dashboard
is a transport of its own, like protocol/http and protocol/grpc).

Differs from the v2 API where the dashboard's user needs it to: an action the
server cannot take in its present state (nothing to restore, a folder in the
way) is a conflict (409), not a malformed request."""

from __future__ import annotations

from edgebox.errors import EdgeboxError, ErrorCode

STATUS_BY_CODE = {
    ErrorCode.INVALID_ARG: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNSUPPORTED: 409,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.INTERNAL: 500,
    ErrorCode.CANCELLED: 409,
}


def status_of(error: EdgeboxError) -> int:
    return STATUS_BY_CODE[error.code]
