"""Errors that carry a protocol-neutral code.

Only ``protocol/http/error_map.py`` turns a code into an HTTP status, the way Triton's
``Status`` codes are mapped by each frontend. Messages follow one shape: where,
then what, then expected versus got, with names in single quotes.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.Enum):
    INVALID_ARG = "INVALID_ARG"
    NOT_FOUND = "NOT_FOUND"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    INTERNAL = "INTERNAL"
    CANCELLED = "CANCELLED"


class EdgeboxError(Exception):
    """An error a caller can act on; ``str(err)`` is the message shown to users."""

    code: ErrorCode = ErrorCode.INTERNAL
    answered_by_model: bool = False
    """True when the model itself answered the request with this error (a python
    model's ``InferenceResponse(error=...)``), False when running it failed.
    Statistics tell them apart as Triton 2.51 does: the model ran and answered,
    so such a request counts as a success, not a failure."""

    def __init__(
        self, message: str, code: ErrorCode | None = None, *, answered_by_model: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if answered_by_model:
            self.answered_by_model = True

    def __str__(self) -> str:
        return self.message


class InvalidArgument(EdgeboxError):
    code = ErrorCode.INVALID_ARG


class NotFound(EdgeboxError):
    code = ErrorCode.NOT_FOUND


class Unavailable(EdgeboxError):
    code = ErrorCode.UNAVAILABLE


class Unsupported(EdgeboxError):
    code = ErrorCode.UNSUPPORTED


class Cancelled(EdgeboxError):
    """The request was dropped unrun because nobody waits for its answer."""

    code = ErrorCode.CANCELLED


class ConfigError(EdgeboxError):
    """A problem in a configuration file, located as ``path:line:col`` when known.

    Line and column are 1-based, as editors and protobuf's ``ParseError`` count them.
    """

    code = ErrorCode.INVALID_ARG

    def __init__(
        self, path: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.detail = message
        location = path
        if line is not None:
            location += f":{line}"
            if column is not None:
                location += f":{column}"
        super().__init__(f"{location}: {message}")


def one_line(exc: BaseException) -> str:
    """``RuntimeError: first line of its message``: how an exception from
    code edgebox does not own (a runtime, a driver, a backend) goes into a
    model's error or state reason, which clients and the dashboard show on
    one line. Only the first line: a runtime's message can run to a whole
    report. An exception whose ``str`` raises, or whose message is empty
    (``MemoryError()``), gives its type name alone."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    lines = text.strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
