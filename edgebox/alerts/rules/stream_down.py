"""``stream_down``: a stream not running (starting, reconnecting, model error)
for ``alerts.stream_down_after_s``. One the daemon stopped is no alert."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from edgebox.alerts.alert import Finding
from edgebox.alerts.rules.base import Inputs, remember
from edgebox.events import StreamState, StreamStatus

UP = (StreamState.RUNNING, StreamState.STOPPED)


@dataclass
class _Down:
    since: float
    state: str
    reason: str


class StreamDownRule:
    name: ClassVar[str] = "stream_down"
    EVENTS: ClassVar[tuple[type, ...]] = (StreamStatus,)

    def __init__(self, after_s: float) -> None:
        self._after_s = after_s
        self._down: dict[str, _Down] = {}

    def observe(self, event: Any, now: float) -> None:
        if not isinstance(event, StreamStatus):
            return
        if event.state in UP:
            self._down.pop(event.name, None)
            return
        down = self._down.get(event.name)
        since = down.since if down is not None else now
        remember(self._down, event.name, _Down(since, event.state.value, event.reason))

    def findings(self, inputs: Inputs, now: float) -> dict[str, Finding]:
        found = {}
        for stream, down in self._down.items():
            seconds = now - down.since
            if seconds >= self._after_s:
                reason = f": {down.reason}" if down.reason else ""
                message = f"stream '{stream}' {down.state} for {seconds:.0f} s{reason}"
                found[stream] = Finding("warn", message)
        return found
