"""One ``ModelStreamInfer`` request's responses as Triton streams them: each
rendered as a ``ModelStreamInferResponse`` (an error as ``error_message`` with
the text a unary call would carry), ``triton_final_response`` set where the
model is decoupled or the client asked for empty finals, and handed to the
stream's handler thread without blocking (``service.InferenceService``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tritonclient.grpc import service_pb2 as pb

from edgebox.errors import EdgeboxError
from edgebox.protocol.grpc import infer_codec
from edgebox.protocol.shared_memory import RegionLease
from edgebox.responses import Outcome
from edgebox.tensors import InferRequest

log = logging.getLogger("edgebox.grpc")

INTERNAL_ERROR = "internal server error"
"""What a client is told when a call fails unexpectedly (the log says more)."""

EMPTY_FINAL_PARAMETER = "triton_enable_empty_final_response"
"""A stream request's parameter (tritonclient's ``enable_empty_final_response``):
a final that comes without a response is still sent, as an empty response."""
FINAL_PARAMETER = "triton_final_response"
"""Set on each streamed response of a decoupled model (or when the client asked
for empty finals): whether it is the request's last."""


Emit = Callable[[pb.ModelStreamInferResponse | None, bool], None]
"""Hands a rendered answer (None: nothing to send) and whether it is the
request's final to the stream's handler thread; callable from any thread."""


class StreamSink:
    """One stream request's sink: renders each response as Triton streams it
    and hands it to the stream's handler thread (``emit``); never blocks. The
    shared-memory regions the request named stay leased until its final."""

    __slots__ = ("_emit", "_empty_final", "_message", "_regions", "_request")

    def __init__(
        self,
        message: pb.ModelInferRequest,
        emit: Emit,
        empty_final: bool,
        request: InferRequest,
        regions: RegionLease,
    ) -> None:
        self._message = message
        self._emit = emit
        self._empty_final = empty_final
        self._request = request
        self._regions = regions

    def send(self, response: Outcome, final: bool) -> None:
        try:
            self._send(response, final)
        finally:
            if final:
                self._regions.release()

    def _send(self, response: Outcome, final: bool) -> None:
        message = self._message
        if isinstance(response, EdgeboxError):
            self._emit(stream_error(message, str(response)), final)
            return
        if response is None:
            answer = None
            if self._empty_final:
                empty = pb.ModelInferResponse(model_name=message.model_name, id=message.id)
                empty.parameters[FINAL_PARAMETER].bool_param = True
                answer = pb.ModelStreamInferResponse(infer_response=empty)
            self._emit(answer, final)
            return
        if self._empty_final:
            response.parameters[FINAL_PARAMETER] = final
        try:
            encoded = infer_codec.encode_response(response, self._request, self._regions)
        except EdgeboxError as error:
            self._emit(stream_error(message, str(error)), final)
            return
        except Exception:
            log.exception("grpc: encoding a stream response of '%s' failed", message.model_name)
            self._emit(stream_error(message, INTERNAL_ERROR), final)
            return
        self._emit(pb.ModelStreamInferResponse(infer_response=encoded), final)


def stream_error(message: pb.ModelInferRequest, text: str) -> pb.ModelStreamInferResponse:
    """A stream's error answer: the text a unary call would carry, and the id."""
    return pb.ModelStreamInferResponse(
        error_message=text, infer_response=pb.ModelInferResponse(id=message.id)
    )
