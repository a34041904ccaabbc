"""What a rollout sees of live requests: observers the dataplane calls with
each request's answer or error and its latency, on the request's thread, so
each only counts and hands on (a shadow copy) and never blocks."""

from __future__ import annotations

from collections.abc import Callable

from edgebox.errors import ErrorCode
from edgebox.lifecycle.registry import Observer
from edgebox.lifecycle.rollout.gates import Tally
from edgebox.lifecycle.rollout.shadow import ShadowRunner
from edgebox.tensors import InferRequest, InferResponse


def serving_observer(tally: Tally, shadow: ShadowRunner | None) -> Observer:
    """The serving version's side: its latency and failures, and (shadow) a
    copy of each answered request for the new version."""

    def observe(
        request: InferRequest,
        response: InferResponse | None,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        if error is not None and client_mistake(error):
            return
        tally.serving(seconds, error is not None)
        if response is not None and shadow is not None:
            shadow.offer(request, response)

    return observe


def candidate_observer(tally: Tally, failed: Callable[[], None]) -> Observer:
    """The new version's answers for real (canary, watch window);
    ``failed`` is called after each failure is counted."""

    def observe(
        request: InferRequest,
        response: InferResponse | None,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        if error is not None and client_mistake(error):
            return
        tally.candidate(seconds, "" if error is None else str(error) or type(error).__name__)
        if error is not None:
            failed()

    return observe


def client_mistake(error: BaseException) -> bool:
    """A request the model refused as invalid is the client's failure, not
    the version's; neither is one cancelled by its client."""
    code = getattr(error, "code", None)
    return code in (ErrorCode.INVALID_ARG, ErrorCode.CANCELLED)
