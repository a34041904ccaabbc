"""``ModelInfer``'s request and response on the wire, with the tensors' bytes
left where they are.

protobuf copies every ``raw_input_contents`` entry when it parses a request
and again when Python reads it, and every ``raw_output_contents`` entry when
it is set and when the answer is serialised: four passes over a camera frame
that the model reads once. Here only the tensor fields are handled by hand:
the request's top-level fields are walked, each ``raw_input_contents`` entry
becomes a view into the received bytes and everything else is handed to
protobuf as it arrived (so its rules, unknown fields and repeated scalars
included, stay protobuf's); the answer is protobuf's serialisation of all
but the tensors, followed by the tensors as length-delimited fields, which
protobuf reads as the same message (field order is free in its encoding).

Every length is checked against the bytes received: a truncated or forged
request is an ``InvalidArgument``, never a read past the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb

from edgebox.errors import InvalidArgument

RAW_INPUT_FIELD = pb.ModelInferRequest.DESCRIPTOR.fields_by_name["raw_input_contents"].number
RAW_OUTPUT_FIELD = pb.ModelInferResponse.DESCRIPTOR.fields_by_name["raw_output_contents"].number
_LENGTH_DELIMITED = 2
_RAW_OUTPUT_TAG = bytes([(RAW_OUTPUT_FIELD << 3) | _LENGTH_DELIMITED])


def _varint(data: memoryview, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end:
            raise InvalidArgument("ModelInferRequest: truncated message (a varint at the end)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise InvalidArgument("ModelInferRequest: malformed message (a varint over 10 bytes)")


def split_infer_request(data: bytes) -> tuple[pb.ModelInferRequest, list[memoryview]]:
    """The request without its ``raw_input_contents``, and those entries as
    views into ``data``, in order."""
    view = memoryview(data)
    end = len(view)
    raw: list[memoryview] = []
    rest: list[memoryview] = []
    at = 0
    while at < end:
        start = at
        key, at = _varint(view, at, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise InvalidArgument("ModelInferRequest: malformed message (field number 0)")
        if wire == 0:
            _, at = _varint(view, at, end)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == _LENGTH_DELIMITED:
            length, at = _varint(view, at, end)
            if length > end - at:
                raise InvalidArgument(
                    f"ModelInferRequest: truncated message (field {field} says {length} bytes, "
                    f"{end - at} left)"
                )
            if field == RAW_INPUT_FIELD:
                raw.append(view[at : at + length])
                at += length
                continue
            at += length
        else:
            raise InvalidArgument(f"ModelInferRequest: malformed message (wire type {wire})")
        if at > end:
            raise InvalidArgument("ModelInferRequest: truncated message")
        rest.append(view[start:at])
    try:
        message = pb.ModelInferRequest.FromString(b"".join(rest))
    except DecodeError as error:
        raise InvalidArgument(f"ModelInferRequest: malformed message ({error})") from None
    return message, raw


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def join_infer_response(message: pb.ModelInferResponse, raw: Sequence[object]) -> bytes:
    """``message`` (with no ``raw_output_contents`` of its own) serialised
    with ``raw`` (bytes-like, C-contiguous) as its ``raw_output_contents``:
    the tensors are copied once, into the answer."""
    if len(message.raw_output_contents):
        raise ValueError("join_infer_response: the message already holds raw_output_contents")
    parts: list[object] = [message.SerializeToString()]
    for entry in raw:
        size = memoryview(entry).nbytes
        parts += (_RAW_OUTPUT_TAG, _varint_bytes(size), entry)
    return b"".join(parts)
