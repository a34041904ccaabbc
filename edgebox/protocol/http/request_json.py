"""A request body's JSON object, parsed the one way every endpoint parses it.

A client's JSON is hostile: nesting deep enough to exhaust Python's recursion
limit is as much a client mistake as a missing brace, so both are
InvalidArgument (400), never an internal error.
"""

from __future__ import annotations

import json

from edgebox.errors import InvalidArgument


def parse_object(raw: bytes | memoryview, where: str) -> dict:
    """The JSON object in ``raw``; InvalidArgument, prefixed with ``where``,
    for malformed JSON, nesting too deep, or a document that is not an object."""
    try:
        document = json.loads(bytes(raw))
    except ValueError as exc:
        raise InvalidArgument(f"{where}: request JSON is malformed: {exc}") from None
    except RecursionError:
        raise InvalidArgument(f"{where}: request JSON nests too deeply") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"{where}: request JSON must be an object")
    return document
