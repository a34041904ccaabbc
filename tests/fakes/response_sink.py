"""Response sinks for scheduler, dataplane and backend tests.

- ``FakeResponseSink`` records every send with the thread that made it,
  accepts anything (a second final too, so a test can count them) and lets a
  test wait for the first final.
- ``FakeStreamSink`` keeps every (response or error, final) send and sets
  ``final`` at the final one: what the python backend's streaming tests read."""

from __future__ import annotations

import threading


class FakeResponseSink:
    def __init__(self, raises: BaseException | None = None) -> None:
        self.sends: list[tuple[object, bool, str]] = []
        """(response or error, final, name of the sending thread), in order."""
        self.finished = threading.Event()
        self._raises = raises

    def send(self, response, final: bool) -> None:
        self.sends.append((response, final, threading.current_thread().name))
        if final:
            self.finished.set()
        if self._raises is not None:
            raise self._raises

    def wait(self, timeout_s: float = 10) -> None:
        assert self.finished.wait(timeout_s), "no final response within the deadline"

    @property
    def finals(self) -> list:
        return [response for response, final, _ in self.sends if final]

    @property
    def only_final(self):
        """The one send, which must be final: what every non-decoupled request gets."""
        assert [final for _, final, _ in self.sends] == [True], self.sends
        return self.sends[0][0]


class FakeStreamSink:
    def __init__(self) -> None:
        self.sends: list[tuple[object, bool]] = []
        self.final = threading.Event()

    def send(self, response, final: bool) -> None:
        self.sends.append((response, final))
        if final:
            self.final.set()
