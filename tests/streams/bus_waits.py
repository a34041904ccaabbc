"""Waiting on the event bus against a deadline, instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

from edgebox.events import Subscription


def wait_for_event(
    subscription: Subscription,
    predicate: Callable[[object], bool] = lambda event: True,
    timeout_s: float = 20.0,
    what: str = "an event",
    seen: list | None = None,
):
    """The first event matching ``predicate``; every event read is appended
    to ``seen`` (if given). Fails at the deadline with what was seen."""
    deadline = time.monotonic() + timeout_s
    skipped = []
    while True:
        remaining = deadline - time.monotonic()
        event = subscription.get(timeout=max(0.0, remaining)) if remaining > 0 else None
        if event is None:
            raise AssertionError(
                f"timed out after {timeout_s}s waiting for {what}; last events: {skipped[-5:]}"
            )
        if seen is not None:
            seen.append(event)
        if predicate(event):
            return event
        skipped.append(event)
