"""A fake backend instance for scheduler tests: records every batch it is
handed, echoes each request's input ``X`` as output ``Y``, and can be held
inside ``execute`` until the test releases it."""

from __future__ import annotations

import threading

from edgebox.tensors import InferRequest, InferResponse, Tensor


class FakeGatedInstance:
    def __init__(self, name: str = "fake", hold_first: bool = False) -> None:
        self.name = name
        self.batches: list[list[InferRequest]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.executed = threading.Event()
        self.closed = False
        self._hold = hold_first

    def execute(self, requests):
        self.batches.append(list(requests))
        self.entered.set()
        if self._hold:
            self._hold = False
            assert self.release.wait(10), "the test never released the instance"
        results = [self.answer(request) for request in requests]
        self.executed.set()
        return results

    def answer(self, request: InferRequest) -> InferResponse:
        """Y = 2 * X; a subclass answers otherwise."""
        return InferResponse(
            "m", "1", [Tensor("Y", "FP32", request.input("X").data * 2)], id=request.id
        )

    def close(self) -> None:
        self.closed = True
