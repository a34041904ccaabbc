"""What a rollout sees of live requests: observers the dataplane calls with
each request's answer or error and its latency, on the request's thread, so
each only counts and hands on (a shadow copy) and never blocks. A request the
model refused as invalid, or one its client cancelled, is nobody's failure
and is not seen at all."""

from __future__ import annotations

from collections.abc import Callable

from edgebox.errors import ErrorCode
from edgebox.lifecycle.registry import Observer
from edgebox.lifecycle.rollout.gates import Tally
from edgebox.lifecycle.rollout.shadow import ShadowRunner
from edgebox.tensors import InferRequest, InferResponse

Seen = Callable[[InferRequest, "InferResponse | None", float, "BaseException | None"], None]


def serving_observer(tally: Tally, shadow: ShadowRunner | None) -> Observer:
    """The serving version's side: its latency and failures, and (shadow) a
    copy of each answered request for the new version."""

    def seen(request, response, seconds, error) -> None:
        tally.serving(seconds, error is not None)
        if response is not None and shadow is not None:
            shadow.offer(request, response)

    return _unless_client_mistake(seen)


def candidate_observer(tally: Tally, failed: Callable[[], None]) -> Observer:
    """The new version's answers for real (canary, watch window);
    ``failed`` is called after each failure is counted."""

    def seen(request, response, seconds, error) -> None:
        tally.candidate(seconds, "" if error is None else str(error) or type(error).__name__)
        if error is not None:
            failed()

    return _unless_client_mistake(seen)


def _unless_client_mistake(seen: Seen) -> Observer:
    def observe(
        request: InferRequest,
        response: InferResponse | None,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        if error is None or getattr(error, "code", None) not in _NOBODYS_FAILURE:
            seen(request, response, seconds, error)

    return observe


_NOBODYS_FAILURE = (ErrorCode.INVALID_ARG, ErrorCode.CANCELLED)
