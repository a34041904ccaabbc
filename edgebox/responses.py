"""Where a request's responses go: the response-sink contract between whoever
produces responses (a scheduler; later a decoupled model) and whoever waits for
them (a transport's stream, the dataplane's unary ``infer``).

A request is submitted together with a sink. Its producer calls
``sink.send(response, final)`` zero or more times with ``final=False``, then
exactly once with ``final=True``: Triton's ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``
flag, which may come without a response (``send(None, final=True)``) when the
last response was already sent. Unary inference is the special case: exactly
one send, final, carrying the response or the error (``UnaryResponse``). A
decoupled model sends zero, one or many (python_backend's
``request.get_response_sender().send(response, flags=...)`` maps onto ``send``).

Errors travel the same way: an ``EdgeboxError`` in place of a response. A
request's failure is never raised at whoever submitted it; it is sent, as the
final response for an ordinary model. A non-final error is allowed (a decoupled
model may report one and go on, as Triton's streams do).

Threads: ``send`` may be called from any thread: the submitting thread before
``submit`` returns (the direct scheduler, ensembles), a batcher worker, or a
thread a decoupled model started. One request's sends never overlap: its
producer makes them one after another, the final last. ``send`` hands the
response on and returns: it must not block or call back into a scheduler,
since it may run on a batcher worker, under its queue lock, while the rest of
the batch waits; a transport that writes to a socket queues the response for
its own thread.

A send after the final one is the producer's bug: sinks raise
``ResponseContractError`` (python_backend likewise raises to a model that
sends on a closed sender) and drop the response; the first final stands.

Cancellation belongs to the request (``InferRequest.is_cancelled``), not to the
sink. A producer that finds its request cancelled stops early and sends a
``Cancelled`` error as the final. A sink whose reader is gone keeps accepting
sends and drops them, so the final still arrives and releases what the request
holds (its model version, for a reload's drain).
"""

from __future__ import annotations

from _thread import allocate_lock
from typing import Protocol

from edgebox.errors import EdgeboxError, Unsupported
from edgebox.tensors import InferResponse

Outcome = InferResponse | EdgeboxError | None
"""What one ``send`` carries; None only with ``final=True``."""


class ResponseContractError(EdgeboxError):
    """A producer broke the contract above (a send after the final one, more
    than one response for a unary request): an edgebox or model bug, INTERNAL."""


class DecoupledUnary(Unsupported):
    """A unary call to a decoupled model, whose answers need a stream;
    transports reword it as Triton does (``UNARY_REFUSAL_HTTP``, 501, and
    ``UNARY_REFUSAL_GRPC``, UNIMPLEMENTED)."""


UNARY_REFUSAL_HTTP = "HTTP end point doesn't support models with decoupled transaction policy"
"""Triton 2.51's answer to ``/infer`` on a decoupled model."""
UNARY_REFUSAL_GRPC = "ModelInfer RPC doesn't support models with decoupled transaction policy"
"""Triton 2.51's answer to ``ModelInfer`` on a decoupled model."""


class ResponseSink(Protocol):
    def send(self, response: Outcome, final: bool) -> None:
        """Take one response (or error) of the request; ``final`` marks the
        last send. See the module docstring for threads and misuse."""


class UnaryResponse:
    """The sink of one unary request: takes exactly one final response and
    hands it to the one thread that waits in ``result``.

    Costs no allocation beyond itself when the response is sent before
    ``result`` is called (the direct scheduler answers on the caller's thread);
    a waiter that comes first parks on a lock of its own, released by the
    sender. Who parks is decided by the order of two appends to ``_handoff``,
    each atomic, so neither side can miss the other.
    """

    __slots__ = ("_final", "_handoff", "_outcome", "_where")

    def __init__(self, where: str = "") -> None:
        self._where = where
        self._final = False
        self._handoff: list = []

    def send(self, response: Outcome, final: bool) -> None:
        if not final or self._final:
            raise self._misuse(final)
        self._outcome = response
        self._final = True
        handoff = self._handoff
        handoff.append(None)
        if handoff[0] is not None:
            handoff[0].release()

    @property
    def done(self) -> bool:
        """True once the final response is in; ``result`` then returns at once."""
        return self._final

    def result(self) -> InferResponse:
        """The response, once sent; raises the error sent instead. Blocks the
        one waiting thread until the final send."""
        if not self._final:
            lock = allocate_lock()
            lock.acquire()
            self._handoff.append(lock)
            if self._handoff[0] is lock:
                lock.acquire()
        outcome = self._outcome
        if isinstance(outcome, InferResponse):
            return outcome
        if outcome is None:
            raise ResponseContractError(f"{self._where}: the request completed without a response")
        raise outcome

    def _misuse(self, final: bool) -> ResponseContractError:
        if self._final:
            return ResponseContractError(f"{self._where}: a response was sent after the final one")
        return ResponseContractError(
            f"{self._where}: a unary request got a non-final response; "
            "only decoupled models send those"
        )
