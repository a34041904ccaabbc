"""The rule Triton's logging and trace extensions share for a settings update
sent by a client: a JSON object whose every key is a setting the extension
knows. One copy, so both refuse a malformed update with the same words.

Spec: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_logging.md
and extension_trace.md beside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from edgebox.errors import InvalidArgument


def known_changes(where: str, changes: Any, known: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """Each ``(key, value)`` of ``changes`` in the client's order.
    InvalidArgument, its message prefixed with ``where``, when ``changes`` is
    no JSON object or when a key not in ``known`` is reached: keys are judged
    as they come, so a caller that refuses a value refuses the first mistake
    the client wrote, whichever kind it is."""
    if not isinstance(changes, dict):
        raise InvalidArgument(f"{where}: expected a JSON object, got {type(changes).__name__}")
    for key, value in changes.items():
        if key not in known:
            names = ", ".join(f"'{name}'" for name in known)
            raise InvalidArgument(f"{where}: unknown setting '{key}' (known: {names})")
        yield key, value
