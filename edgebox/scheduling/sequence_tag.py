"""Which sequence a request belongs to, read from its ``sequence_id``,
``sequence_start`` and ``sequence_end`` parameters.

Both transports deliver those parameters as they came (HTTP JSON values,
gRPC ``InferParameter`` choices), so the checks live here, once. A
correlation ID is a non-zero unsigned 64-bit integer or a non-empty string,
as in Triton; the integer 5 and the string "5" are different sequences. The
refusals for a missing ID or batch size use Triton 2.51's words, which
clients match on; the type checks are edgebox's own (Triton answers a negative
JSON ``sequence_id`` with a 500).
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebox.errors import InvalidArgument
from edgebox.tensors import InferRequest


class _WarmupSequence:
    """The correlation ID of warm-up requests: no transport can produce it,
    so a warm-up never meets a client's sequence."""

    def __repr__(self) -> str:
        return "<warm-up sequence>"


WARMUP_SEQUENCE = _WarmupSequence()

CorrelationId = int | str | _WarmupSequence

_UINT64_LIMIT = 1 << 64
MAX_STRING_ID_CHARS = 256
"""A string correlation ID is kept while its sequence lives and echoed in
refusals: a client's megabyte-long ID must not be."""


@dataclass(frozen=True, slots=True)
class SequenceTag:
    id: CorrelationId
    start: bool
    end: bool


def sequence_tag(request: InferRequest, model_name: str) -> SequenceTag:
    """The request's sequence; InvalidArgument when it names none or names
    one badly."""
    parameters = request.parameters
    correlation_id = parameters.get("sequence_id", 0)
    if correlation_id is WARMUP_SEQUENCE:
        return SequenceTag(WARMUP_SEQUENCE, True, True)
    if isinstance(correlation_id, bool) or not isinstance(correlation_id, int | str):
        raise InvalidArgument(
            f"inference request to model '{model_name}': parameter 'sequence_id' must be an "
            f"unsigned integer or a string, got {type(correlation_id).__name__}"
        )
    if isinstance(correlation_id, int) and not 0 <= correlation_id < _UINT64_LIMIT:
        raise InvalidArgument(
            f"inference request to model '{model_name}': parameter 'sequence_id' must be an "
            f"unsigned 64-bit integer, got {correlation_id}"
        )
    if isinstance(correlation_id, str) and len(correlation_id) > MAX_STRING_ID_CHARS:
        raise InvalidArgument(
            f"inference request to model '{model_name}': parameter 'sequence_id' is a string of "
            f"{len(correlation_id)} characters, more than the {MAX_STRING_ID_CHARS} allowed"
        )
    if correlation_id in (0, ""):
        raise InvalidArgument(
            f"inference request to model '{model_name}' must specify a non-zero or non-empty "
            "correlation ID"
        )
    return SequenceTag(
        correlation_id,
        _flag(parameters, "sequence_start", model_name),
        _flag(parameters, "sequence_end", model_name),
    )


def _flag(parameters: dict, name: str, model_name: str) -> bool:
    value = parameters.get(name, False)
    if not isinstance(value, bool):
        raise InvalidArgument(
            f"inference request to model '{model_name}': parameter '{name}' must be a boolean, "
            f"got {type(value).__name__}"
        )
    return value


def describe_id(correlation_id: CorrelationId) -> str:
    """The ID as Triton prints it in messages: integers bare, strings as given."""
    return str(correlation_id)
